package config

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// backendTypes are every backend type's naming scheme.
var backendTypes = []string{BackendLocal, BackendMemory, BackendAzure}

// checkPair asserts the physical name of a valid (tenant, queue) pair is a valid name on
// the backend and reads back to exactly that pair: so no two valid pairs share a name.
func checkPair(t *testing.T, typ, tenant, queue string) {
	t.Helper()
	if !ValidQueueName(queue) || checkTenantName(typ, tenant) != nil {
		return
	}
	p := physicalQueue(typ, tenant, queue)
	if len(p) > MaxQueueName && typ == BackendAzure {
		return // refused at load and at emit (checkPhysical)
	}
	if err := checkPhysical(typ, p); err != nil {
		if len(p) >= 3 {
			t.Fatalf("%s: (%q, %q) -> %q: %v", typ, tenant, queue, p, err)
		}
		return
	}
	wantT := tenant
	if wantT == "" {
		wantT = DefaultTenant
	}
	gt, gq, ok := decodePhysicalQueue(typ, p)
	if !ok || gt != wantT || gq != queue {
		t.Fatalf("%s: (%q, %q) -> %q reads back as (%q, %q, %v)", typ, tenant, queue, p, gt, gq, ok)
	}
}

// TestPhysicalQueueInjective enumerates every tenant and queue name over a small alphabet
// holding the characters that matter (a letter, a digit, '-', '_') and checks that no two
// valid pairs get the same physical name on any backend, the default tenant included.
func TestPhysicalQueueInjective(t *testing.T) {
	var names []string
	var gen func(prefix string, n int)
	gen = func(prefix string, n int) {
		if prefix != "" {
			names = append(names, prefix)
		}
		if n == 0 {
			return
		}
		for _, c := range []string{"a", "1", "-", "_", "d"} {
			gen(prefix+c, n-1)
		}
	}
	gen("", 4)
	names = append(names, DefaultTenant, "default-x", "acme", "acme-orders", "x", "x-y", "y-jobs", "1-x", "11-a")
	for _, typ := range backendTypes {
		seen := map[string][2]string{}
		pairs := 0
		for _, tn := range names {
			if checkTenantName(typ, tn) != nil {
				continue
			}
			for _, q := range names {
				if !ValidQueueName(q) {
					continue
				}
				checkPair(t, typ, tn, q)
				p := physicalQueue(typ, tn, q)
				if prev, dup := seen[p]; dup && prev != [2]string{tn, q} && !(prev[0] == DefaultTenant && tn == DefaultTenant) {
					t.Fatalf("%s: %q is the queue of both %v and %v", typ, p, prev, [2]string{tn, q})
				}
				seen[p] = [2]string{tn, q}
				pairs++
			}
		}
		if pairs < 1000 {
			t.Fatalf("%s: only %d pairs checked", typ, pairs)
		}
	}
	// The collisions of the old scheme are apart now.
	for _, c := range [][2][2]string{
		{{DefaultTenant, "acme-orders"}, {"acme", "orders"}},
		{{"x", "y-jobs"}, {"x-y", "jobs"}},
	} {
		a, b := physicalQueue(BackendAzure, c[0][0], c[0][1]), physicalQueue(BackendAzure, c[1][0], c[1][1])
		if a == b {
			t.Errorf("azure: %v and %v share %q", c[0], c[1], a)
		}
	}
}

// FuzzPhysicalQueueInjective: any valid pair's physical name reads back to that pair.
func FuzzPhysicalQueueInjective(f *testing.F) {
	for _, s := range [][2]string{{"default", "acme-orders"}, {"acme", "orders"}, {"x", "y-jobs"}, {"x-y", "jobs"}, {"1", "1-a"}, {"a_b", "c"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, tenant, queue string) {
		for _, typ := range backendTypes {
			checkPair(t, typ, tenant, queue)
		}
	})
}

// TestBackendNameRules: the validator applies each backend's real rule at load and names
// the key, instead of letting the queue fail at start.
func TestBackendNameRules(t *testing.T) {
	azure := "backends:\n  cloud: {type: azure, connection_string_env: X}\n"
	one := func(tenant, queue, backend string) string {
		return fmt.Sprintf("tenants:\n  %s:\n    bindings:\n      b: {backend: %s, queue: %s, module: 'builtin:echo-go'}\n", tenant, backend, queue)
	}
	cases := []struct{ name, yaml, want string }{
		{"azure queue of two characters", azure + one("default", "ab", "cloud"), `tenants.default.bindings.b.queue: the Azure queue name "ab" is 2 characters, outside Azure's 3..63`},
		{"double hyphen", one("acme", "a--b", "local"), `tenants.acme.bindings.b.queue: queue name "a--b" must be`},
		{"leading digit", one("acme", "1orders", "local"), `tenants.acme.bindings.b.queue: queue name "1orders" must be`},
		{"underscore tenant on azure", azure + one("a_b", "orders", "cloud"), `tenants.a_b: tenant name "a_b" cannot own Azure queues`},
		{"double hyphen tenant on azure", azure + one("a--b", "orders", "cloud"), `tenants.a--b: tenant name "a--b" cannot own Azure queues`},
		{"reserved poison queue", one("acme", "orders-poison", "local"), `tenants.acme.bindings.b.queue: queue name "orders-poison": names ending in -poison are reserved`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), t.TempDir())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error containing %q, got %v", tc.want, err)
			}
		})
	}
	// A tenant with '_' stays fine on a local backend.
	if _, err := Parse([]byte(one("a_b", "orders", "local")), t.TempDir()); err != nil {
		t.Fatal(err)
	}
}

// TestAdminBeyondLoopbackNeedsToken: an admin address reachable from the network without a
// host token is refused at load, naming the key, unless admin.allow_unauthenticated says so.
func TestAdminBeyondLoopbackNeedsToken(t *testing.T) {
	b := binding("")
	for _, tc := range []struct {
		admin string
		ok    bool
	}{
		{`{addr: "0.0.0.0:8080"}`, false},
		{`{addr: ":8080"}`, false},
		{`{addr: "[::]:8080"}`, false},
		{`{addr: "admin.example.com:8080"}`, false},
		{`{addr: "0.0.0.0:8080", token_env: ADMIN_TOKEN}`, true},
		{`{addr: "0.0.0.0:8080", allow_unauthenticated: true}`, true},
		{`{addr: "127.0.0.1:8080"}`, true},
		{`{addr: "[::1]:8080"}`, true},
		{`{addr: "localhost:8080"}`, true},
		{`{addr: "off"}`, true},
	} {
		_, err := Parse([]byte("admin: "+tc.admin+"\n"+b), t.TempDir())
		switch {
		case tc.ok && err != nil:
			t.Errorf("admin %s: %v", tc.admin, err)
		case !tc.ok && (err == nil || !strings.Contains(err.Error(), "admin.addr:") || !strings.Contains(err.Error(), "admin.allow_unauthenticated")):
			t.Errorf("admin %s: want refused naming admin.addr and admin.allow_unauthenticated, got %v", tc.admin, err)
		}
	}
}

// decodePhysicalQueue returns the (tenant, queue) pair whose queue on a backend of type typ
// is named name, and false when no valid pair has that name. It inverts PhysicalQueue.
func decodePhysicalQueue(typ, name string) (tenant, queue string, ok bool) {
	valid := func(t, q string) (string, string, bool) {
		if !ValidQueueName(q) || checkTenantName(typ, t) != nil || physicalQueue(typ, t, q) != name {
			return "", "", false
		}
		return t, q, true
	}
	if typ == BackendAzure {
		n, rest, found := strings.Cut(name, "-")
		l, err := strconv.Atoi(n)
		if !found || err != nil || l < 1 || l >= len(rest) {
			return valid(DefaultTenant, name)
		}
		if rest[l] != '-' {
			return "", "", false
		}
		return valid(rest[:l], rest[l+1:])
	}
	t, q, found := strings.Cut(name, ".")
	if !found {
		return valid(DefaultTenant, name)
	}
	return valid(t, q)
}
