package host

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestTenantCrossTenantSendRefused: a guest can emit to its own tenant's queues only. An
// emit naming another tenant's queue (by its physical name, or any name outside the
// tenant-local shape) fails that host call; the guest reports it and the message is
// dead-lettered with the reason, and nothing reaches the other tenant.
func TestTenantCrossTenantSendRefused(t *testing.T) {
	guest := abs(t, "../runtime/testdata/guest/guest.wasm")
	h, _ := newHost(t, fmt.Sprintf(`
  acme:
    bindings:
      guest:
        queue: in
        module: %q
%s
  beta:
    bindings:
      guest:
        queue: in
        module: %q
%s`, guest, fast, guest, fast))
	stop := run(t, h)
	refused := []string{"emitto:beta.in", "emitto:beta.in-poison", "emitto:BETA.IN", "emitto:../beta/in", "emitto:beta/in",
		"emitto:in-poison", "emitto:scratch-poison"}
	send(t, h, "acme", "in", append([]string{"emitto:scratch"}, refused...)...)
	eventually(t, "acme's refused emits dead-lettered", func() bool {
		return depth(t, h, "acme", "in-poison") == int64(len(refused))
	})
	eventually(t, "acme's own emit delivered", func() bool { return depth(t, h, "acme", "scratch") == 1 })
	// Counters are bumped after the output is sent and the input deleted: wait for them.
	eventually(t, "acme's counters", func() bool {
		s := bindingStatus(t, h, "acme", "guest")
		return s.Processed >= 1 && s.Poisoned >= uint64(len(refused))
	})
	s := bindingStatus(t, h, "acme", "guest")
	if s.Processed != 1 || s.Poisoned != uint64(len(refused)) {
		t.Errorf("acme processed %d, poisoned %d; want 1 and %d", s.Processed, s.Poisoned, len(refused))
	}
	for _, q := range []string{"in", "in-poison"} {
		if d := depth(t, h, "beta", q); d != 0 {
			t.Errorf("beta's queue %s holds %d messages sent by acme's guest", q, d)
		}
	}
	if b := bindingStatus(t, h, "beta", "guest"); b.Processed+b.Failed != 0 {
		t.Errorf("beta's binding handled %d messages; acme's guest reached it", b.Processed+b.Failed)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	dls, err := ListDeadLetters(context.Background(), h.Config(), "acme", "in", 0)
	if err != nil {
		t.Fatal(err)
	}
	// -5: not a tenant-local queue name at all; -2: denied (a well-formed "-poison" name:
	// dead letters are the host's to write, so none can be forged).
	want := map[string]string{"emitto:beta.in": "emit=-5", "emitto:beta.in-poison": "emit=-5", "emitto:BETA.IN": "emit=-5",
		"emitto:../beta/in": "emit=-5", "emitto:beta/in": "emit=-5", "emitto:in-poison": "emit=-2", "emitto:scratch-poison": "emit=-2"}
	for _, d := range dls {
		if w := want[string(d.Body)]; w == "" || !strings.Contains(d.Reason, w) {
			t.Errorf("dead letter %q: reason %q does not carry the refused emit (%s)", d.Body, d.Reason, w)
		}
	}
	if len(dls) != len(refused) {
		t.Errorf("%d dead letters; want %d", len(dls), len(refused))
	}
}

// TestTenantTokenCannotReadOrNotifyAnotherTenant: a tenant's admin token sees and steers its
// own tenant only: status and metrics leave the other tenants out, notifying another
// tenant's queue and host-wide operations are forbidden; the host token reaches all.
func TestTenantTokenCannotReadOrNotifyAnotherTenant(t *testing.T) {
	u := twoTenantAdmin(t, "")
	for _, c := range []struct{ own, other, token string }{
		{"acme", "beta", "acme-secret"},
		{"beta", "acme", "beta-secret"},
	} {
		t.Run(c.own, func(t *testing.T) {
			st := get(t, u+"/v1/status", c.token, 200)
			if !strings.Contains(st, fmt.Sprintf(`"name": %q`, c.own)) || strings.Contains(st, fmt.Sprintf(`"name": %q`, c.other)) {
				t.Errorf("%s's status shows another tenant or not its own:\n%s", c.own, st)
			}
			m := get(t, u+"/metrics", c.token, 200)
			if !strings.Contains(m, fmt.Sprintf(`tenant=%q`, c.own)) || strings.Contains(m, fmt.Sprintf(`tenant=%q`, c.other)) {
				t.Errorf("%s's metrics show another tenant or not its own", c.own)
			}
			do(t, "POST", u+"/v1/tenants/"+c.other+"/queues/in/notify", c.token, "", 403)
			do(t, "POST", u+"/v1/tenants/"+c.own+"/queues/in/notify", c.token, "", 200)
			do(t, "POST", u+"/v1/reload", c.token, "", 403)
			// The other tenant's token is not accepted for this tenant's queues either.
			do(t, "POST", u+"/v1/tenants/"+c.own+"/queues/in/notify", map[string]string{"acme": "beta-secret", "beta": "acme-secret"}[c.own], "", 403)
		})
	}
	all := get(t, u+"/v1/status", "host-secret", 200)
	if !strings.Contains(all, `"name": "acme"`) || !strings.Contains(all, `"name": "beta"`) {
		t.Errorf("host status lacks a tenant:\n%s", all)
	}
}

func TestTenantAndHostConcurrencyCaps(t *testing.T) {
	mod := abs(t, flakyWasm)
	binding := func(name string) string {
		return fmt.Sprintf("      %s: {queue: in, output: out, module: %q, pool: {max_instances: 4}}\n", name, mod)
	}
	h, _ := newHost(t, "  capped:\n    max_concurrency: 1\n    bindings:\n"+binding("a")+
		"  free:\n    bindings:\n"+binding("b"))
	stop := run(t, h)
	bodies := []string{"sleep:150", "sleep:150", "sleep:150", "sleep:150", "sleep:150", "sleep:150"}
	send(t, h, "capped", "in", bodies...)
	send(t, h, "free", "in", bodies...)
	peak := map[string]int{}
	eventually(t, "both tenants' outputs", func() bool {
		for _, ts := range h.Status(context.Background()).Tenants {
			for _, b := range ts.Bindings {
				peak[ts.Name] = max(peak[ts.Name], b.InFlight)
			}
			if ts.Name == "capped" && ts.Running > 1 {
				t.Errorf("capped tenant holds %d slots", ts.Running)
			}
		}
		return depth(t, h, "capped", "out") == 6 && depth(t, h, "free", "out") == 6
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if peak["capped"] != 1 {
		t.Errorf("capped tenant peak in-flight %d, want 1", peak["capped"])
	}
	if peak["free"] < 2 {
		t.Errorf("uncapped tenant peak in-flight %d, want > 1 (the contrast)", peak["free"])
	}
	t.Logf("peak in flight: capped %d, free %d", peak["capped"], peak["free"])

	// A host-wide budget of 1 holds all tenants together to one call at a time.
	h2, _ := newHostWith(t, "max_concurrency: 1\n", "  x:\n    bindings:\n"+binding("a")+"  y:\n    bindings:\n"+binding("b"))
	stop2 := run(t, h2)
	send(t, h2, "x", "in", bodies[:3]...)
	send(t, h2, "y", "in", bodies[:3]...)
	total := int64(0)
	eventually(t, "outputs under the host budget", func() bool {
		// The budget's own count of calls holding a slot, read in one load: summing the
		// bindings' in-flight counts one after another could count a call that ended in one
		// binding and the next that started in another as running together.
		total = max(total, h2.Status(context.Background()).Running)
		return depth(t, h2, "x", "out") == 3 && depth(t, h2, "y", "out") == 3
	})
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
	if total > 1 {
		t.Errorf("peak calls holding the host budget %d under max_concurrency 1", total)
	}
}
