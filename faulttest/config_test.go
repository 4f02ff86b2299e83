package faulttest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFaultHostileConfig: malformed YAML, absurd values, a YAML alias bomb, path traversal in
// module paths. `wqhost run` refuses each within seconds with exit 2 and an error naming the
// key (or file) and the reason; nothing starts half-configured.
func TestFaultHostileConfig(t *testing.T) {
	binding := func(extra string) string {
		return "tenants:\n  default:\n    bindings:\n      b:\n        queue: jobs\n" + extra
	}
	var bomb strings.Builder // billion laughs: 9^9 strings if aliases were expanded blindly
	bomb.WriteString("a0: &a0 [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n")
	for i := 1; i <= 8; i++ {
		fmt.Fprintf(&bomb, "a%d: &a%d [*a%d,*a%d,*a%d,*a%d,*a%d,*a%d,*a%d,*a%d,*a%d]\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	cases := []struct {
		name, yaml string
		wants      []string
	}{
		{"unclosed flow", "tenants: [unclosed\n", []string{"YAML"}},
		{"tabs and garbage", "tenants:\n\t- ::: {\n", []string{"YAML"}},
		{"binary", "\x00\xff\xfe\x01garbage\x00", []string{"wqhost.yaml"}},
		{"alias bomb", bomb.String(), []string{"wqhost.yaml"}},
		{"huge integer", binding("        module: builtin:echo-go\n        batch_size: 99999999999999999999999999\n"), []string{"batch_size"}},
		{"huge workers", binding("        module: builtin:echo-go\n        max_workers: 1000000000\n"), []string{"max_workers"}},
		{"huge memory", "tenants:\n  default:\n    limits: {memory: 1000TiB}\n    bindings:\n      b: {queue: jobs, module: builtin:echo-go}\n", []string{"limits.memory"}},
		{"huge duration", binding("        module: builtin:echo-go\n        visibility_timeout: 8760000h\n"), []string{"visibility_timeout"}},
		{"huge queue name", binding("        module: builtin:echo-go\n        output: " + strings.Repeat("q", 1<<20) + "\n"), []string{"output"}},
		{"negative size", binding("        module: builtin:echo-go\n        pool: {max_memory: -5MiB}\n"), []string{"max_memory"}},
		{"traversal out of module_dir", "tenants:\n  default:\n    module_dir: mods\n    bindings:\n      b:\n        queue: jobs\n        module: mods/../../../../../../etc/passwd\n",
			[]string{"tenants.default.bindings.b.module", "module_dir"}},
		{"traversal to a non-module", binding("        module: ../../../../../../../../etc/passwd\n"), []string{"tenants.default.bindings.b", "passwd"}},
		{"builtin traversal", binding("        module: builtin:../echo-go\n"), []string{"tenants.default.bindings.b.module", "builtin"}},
	}
	ok := 0
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfgFile := writeConfig(t, dir, tc.yaml)
			p := start(t, cfgFile, []string{"WQHOST_DATA_DIR=" + filepath.Join(dir, "data")})
			code := p.wait(30 * time.Second)
			logs := p.logs()
			if code != 2 {
				t.Errorf("exit %d, want 2: %s", code, tail(logs, 2000))
				return
			}
			for _, w := range tc.wants {
				if !strings.Contains(logs, w) {
					t.Errorf("error does not mention %q: %s", w, tail(logs, 2000))
					return
				}
			}
			t.Logf("%.300s", strings.TrimSpace(logs))
			if len(logs) > 64<<10 {
				t.Errorf("error output of %d bytes: an oversized value should be cut short in the error", len(logs))
				return
			}
			ok++
		})
	}
	report(t, "hostile-config", tally{sent: len(cases), processed: ok, lost: len(cases) - ok, injected: len(cases)})
}

// TestFaultHostileAdmin: admin requests without a token, with a wrong one, with another
// tenant's, with oversized bodies and odd paths get 401/403/413/404, never a success, and the
// host keeps serving.
func TestFaultHostileAdmin(t *testing.T) {
	dir := t.TempDir()
	const hostTok, aTok, bTok = "host-secret-token", "tenant-a-token", "tenant-b-token"
	env := []string{"FAULT_ADMIN_TOKEN=" + hostTok, "FAULT_A_TOKEN=" + aTok, "FAULT_B_TOKEN=" + bTok}
	cfgFile := writeConfig(t, dir, fmt.Sprintf(`data_dir: %s
log: {level: warn}
admin:
  token_env: FAULT_ADMIN_TOKEN
  max_body_bytes: 1KiB
tenants:
  alpha:
    token_env: FAULT_A_TOKEN
    bindings:
      echo: {queue: jobs, output: done, module: builtin:echo-go}
  beta:
    token_env: FAULT_B_TOKEN
    bindings:
      echo: {queue: jobs, output: done, module: builtin:echo-go}
`, filepath.Join(dir, "data")))
	p := startReady(t, cfgFile, env)
	big := bytes.Repeat([]byte("x"), 1<<20)
	cases := []struct {
		name, method, path, token string
		body                      func() io.Reader
		want                      int
	}{
		{"status without token", "GET", "/v1/status", "", nil, 401},
		{"status with a wrong token", "GET", "/v1/status", "nope", nil, 401},
		{"status with a 64 KiB token", "GET", "/v1/status", strings.Repeat("t", 64<<10), nil, 401},
		{"metrics without token", "GET", "/metrics", "", nil, 401},
		{"reload without token", "POST", "/v1/reload", "", nil, 401},
		{"notify without token", "POST", "/v1/tenants/alpha/queues/jobs/notify", "", nil, 401},
		{"notify another tenant", "POST", "/v1/tenants/beta/queues/jobs/notify", aTok, nil, 403},
		{"reload with a tenant token", "POST", "/v1/reload", aTok, nil, 403},
		{"notify, traversal in the tenant", "POST", "/v1/tenants/alpha%2F..%2Fbeta/queues/jobs/notify", aTok, nil, 403},
		{"notify, unknown queue", "POST", "/v1/tenants/alpha/queues/..%2F..%2Fetc/notify", aTok, nil, 404},
		{"notify with a 1 MiB body", "POST", "/v1/tenants/alpha/queues/jobs/notify", aTok, func() io.Reader { return bytes.NewReader(big) }, 413},
		{"notify with a chunked 1 MiB body", "POST", "/v1/tenants/alpha/queues/jobs/notify", hostTok, func() io.Reader { return io.MultiReader(bytes.NewReader(big)) }, 413},
		{"reload with a 1 MiB body", "POST", "/v1/reload", hostTok, func() io.Reader { return bytes.NewReader(big) }, 413},
	}
	ok := 0
	for _, tc := range cases {
		var body io.Reader
		if tc.body != nil {
			body = tc.body()
		}
		code, b, err := p.request(tc.method, tc.path, tc.token, body)
		switch {
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case code != tc.want:
			t.Errorf("%s: %s %s: %d, want %d: %s", tc.name, tc.method, tc.path, code, tc.want, b)
		default:
			ok++
		}
	}
	// A tenant token sees its own tenant only; the host keeps serving.
	code, b, err := p.request("GET", "/v1/status", aTok, nil)
	if err != nil || code != 200 || !strings.Contains(string(b), `"alpha"`) || strings.Contains(string(b), `"beta"`) {
		t.Errorf("status with tenant alpha's token: %d %v: want alpha only: %.300s", code, err, b)
	}
	code, b, err = p.request("GET", "/metrics", bTok, nil)
	if err != nil || code != 200 || strings.Contains(string(b), `tenant="alpha"`) {
		t.Errorf("metrics with tenant beta's token: %d %v: shows tenant alpha", code, err)
	}
	if code, _, err := p.request("GET", "/healthz", "", nil); err != nil || code != http.StatusOK || !p.running() {
		t.Fatalf("host unhealthy after hostile admin requests: %d %v", code, err)
	}
	report(t, "hostile-admin", tally{sent: len(cases), processed: ok, lost: len(cases) - ok, injected: len(cases)})
}
