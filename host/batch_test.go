package host

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// batchGuest is the runtime's batch fixture (runtime/testdata/batchguest): each body is a
// script of steps (ok, emit, trap, ...).
const batchGuest = "../runtime/testdata/batchguest/batchguest.wasm"

// bodiesOf drains tenant's queue and returns the bodies.
func bodiesOf(t *testing.T, h *Host, tenant, queue string) []string {
	t.Helper()
	var out []string
	for _, m := range drainBodies(t, h, tenant, queue) {
		out = append(out, string(m.Body))
	}
	return out
}

// The bulk-sink example on a batching binding: the valid JSON objects of a batch leave as
// one array (one output for many messages), the invalid ones are dead-lettered with a
// reason naming them, in far fewer calls than messages.
func TestBatchBindingBulkSink(t *testing.T) {
	for _, module := range []string{"bulk-sink-tinygo", "bulk-sink-rust"} {
		t.Run(module, func(t *testing.T) {
			h, _ := newHost(t, fmt.Sprintf(`
  default:
    bindings:
      bulk:
        queue: records
        output: sink
        module: builtin:%s
        batch: {max_messages: 100, max_wait: 500ms}
`+fast, module))
			var bodies []string
			for i := range 40 {
				if i%10 == 3 {
					bodies = append(bodies, fmt.Sprintf("not json %d", i))
					continue
				}
				bodies = append(bodies, fmt.Sprintf(`{"n":%d}`, i))
			}
			send(t, h, "default", "records", bodies...)
			run(t, h)
			b := h.bindingNamed("default", "bulk")
			eventually(t, "36 processed and 4 poisoned", func() bool {
				s := b.lis.State()
				return s.Processed == 36 && s.Poisoned == 4
			})
			var got []int
			outs := bodiesOf(t, h, "default", "sink")
			for _, o := range outs {
				var arr []struct{ N int }
				if err := json.Unmarshal([]byte(o), &arr); err != nil {
					t.Fatalf("output %q is not a JSON array: %v", o, err)
				}
				for _, r := range arr {
					got = append(got, r.N)
				}
			}
			slices.Sort(got)
			var want []int
			for i := range 40 {
				if i%10 != 3 {
					want = append(want, i)
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("records in the outputs %v, want each valid one once: %v", got, want)
			}
			if len(outs) > 4 {
				t.Errorf("%d outputs for 36 records, want a few arrays", len(outs))
			}
			if calls := b.cur.Load().pool.Stats().Calls; calls > 4 {
				t.Errorf("%d handler calls for 40 messages, want a few batches", calls)
			}
			dls, err := ListDeadLetters(context.Background(), h.Config(), "default", "records", 0)
			if err != nil || len(dls) != 4 {
				t.Fatalf("dead letters %d (%v), want 4", len(dls), err)
			}
			for _, d := range dls {
				if !strings.HasPrefix(string(d.Body), "not json") || !strings.Contains(d.Reason, d.OriginalID) {
					t.Errorf("dead letter %q: reason %q does not name message %s", d.Body, d.Reason, d.OriginalID)
				}
			}
		})
	}
}

// A guest that traps halfway through a batch: the messages it gave an ok verdict before
// the trap are deleted and their outputs sent once; the trapping one fails, is retried and
// dead-lettered with the trap as its reason.
func TestBatchBindingTrapHalfway(t *testing.T) {
	h, _ := newHost(t, `
  default:
    bindings:
      b:
        queue: in
        output: out
        module: `+abs(t, batchGuest)+`
        batch: {max_messages: 10, max_wait: 500ms}
`+fast)
	send(t, h, "default", "in", "emit;ok", "emit;none;ok", "trap", "emit;ok;none")
	run(t, h)
	b := h.bindingNamed("default", "b")
	eventually(t, "every message settled", func() bool {
		s := b.lis.State()
		return s.Processed+s.Poisoned == 4 && depth(t, h, "default", "in") == 0
	})
	outs := bodiesOf(t, h, "default", "out")
	for _, want := range []string{"emit;ok", "emit;none;ok"} {
		if n := countOf(outs, want); n != 1 {
			t.Errorf("output %q sent %d times, want once (outputs %q)", want, n, outs)
		}
	}
	dls, err := ListDeadLetters(context.Background(), h.Config(), "default", "in", 0)
	if err != nil {
		t.Fatal(err)
	}
	var trapped bool
	for _, d := range dls {
		if string(d.Body) == "emit;ok" || string(d.Body) == "emit;none;ok" {
			t.Errorf("message %q, ok before the trap, was dead-lettered: %s", d.Body, d.Reason)
		}
		if string(d.Body) == "trap" {
			trapped = strings.Contains(d.Reason, "trap")
		}
	}
	if !trapped {
		t.Errorf("the trapping message is not dead-lettered with the trap as its reason: %+v", dls)
	}
}

func countOf(ss []string, s string) int {
	n := 0
	for _, x := range ss {
		if x == s {
			n++
		}
	}
	return n
}

// A batching binding whose module has no wqhost_handle_batch export is refused at load,
// naming the binding and the export.
func TestBatchBindingNeedsTheExport(t *testing.T) {
	cfg := hostConfig(t, "", fmt.Sprintf(`
  default:
    bindings:
      bulky: {queue: in, module: %q, batch: {max_messages: 10}}
`, abs(t, flakyWasm)))
	_, err := New(context.Background(), cfg, testLogger(t))
	if err == nil || !strings.Contains(err.Error(), "tenants.default.bindings.bulky") || !strings.Contains(err.Error(), "wqhost_handle_batch") {
		t.Fatalf("New = %v; want an error naming the binding and wqhost_handle_batch", err)
	}
}
