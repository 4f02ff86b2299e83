package handlers_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tetratelabs/wazero/api"
)

func msgs(bodies ...string) []batchMsg {
	out := make([]batchMsg, len(bodies))
	for i, b := range bodies {
		out[i] = batchMsg{body: []byte(b), meta: map[string]string{
			"id": fmt.Sprintf("m%d", i), "tenant": "t1", "binding": "sink", "dequeue_count": "1",
		}}
	}
	return out
}

var bulkSinks = []string{"bulk-sink-go", "bulk-sink-tinygo", "bulk-sink-rust"}

// bulkSink loads a bulk-sink build with the given binding config (read once per instance, so
// each config gets its own instance).
func bulkSink(t *testing.T, name string, config map[string]string) (*fakeHost, api.Module) {
	t.Helper()
	h, mod := reactor(t, name)
	h.config = config
	if got := call(t, mod, "wqhost_self_test"); got != 0 {
		t.Fatalf("self test = %d, want 0", got)
	}
	return h, mod
}

// TestBulkSinkBatch: the objects of a batch go out as one array, the call's output; the other
// messages are rejected with a reason naming their id; the rest end ok by the call's status.
func TestBulkSinkBatch(t *testing.T) {
	for _, name := range bulkSinks {
		t.Run(name, func(t *testing.T) {
			h, mod := bulkSink(t, name, nil)
			h.resetBatch(msgs(`{"a":1}`, `not json`, " {\"b\":[1,2]}\n", `[{"x":1}]`, `{"c":"\u00e9"}`, `{"d":`, "{\"e\":\"\xff\"}", ``))
			status := call(t, mod, "wqhost_handle_batch")
			ends, out := h.endBatch(status)
			if status != 0 {
				t.Fatalf("status %d (error %q), want 0", status, h.errText)
			}
			if want := []string{`:[{"a":1},{"b":[1,2]},{"c":"\u00e9"}]`}; !slices.Equal(out, want) {
				t.Fatalf("call outputs %q, want %q", out, want)
			}
			rejected := map[int]string{
				1: "message m1: the body is not valid JSON",
				3: "message m3: the body is JSON but not an object",
				5: "message m5: the body is not valid JSON",
				6: "message m6: the body is not valid JSON (not UTF-8)",
				7: "message m7: the body is not valid JSON",
			}
			for i, e := range ends {
				if want, bad := rejected[i]; bad {
					if e.status != 2 || e.reason != "bulk-sink: "+want {
						t.Errorf("message %d ends %+v, want rejected with %q", i, e, want)
					}
				} else if e.status != 0 || len(e.outputs) != 0 {
					t.Errorf("message %d ends %+v, want ok without outputs of its own", i, e)
				}
			}
		})
	}
}

// TestBulkSinkSplits: arrays never exceed max_output_bytes; an object that cannot fit an
// array of its own is rejected.
func TestBulkSinkSplits(t *testing.T) {
	obj := func(n int) string { return `{"s":"` + strings.Repeat("x", n-8) + `"}` } // n bytes
	for _, name := range bulkSinks {
		t.Run(name, func(t *testing.T) {
			h, mod := bulkSink(t, name, map[string]string{"max_output_bytes": "23"})
			h.resetBatch(msgs(obj(10), obj(10), obj(10), obj(22), obj(21), obj(9), obj(9)))
			status := call(t, mod, "wqhost_handle_batch")
			ends, out := h.endBatch(status)
			want := []string{
				":[" + obj(10) + "," + obj(10) + "]", // 23 bytes: exactly the limit
				":[" + obj(10) + "]",
				":[" + obj(21) + "]",
				":[" + obj(9) + "," + obj(9) + "]",
			}
			if status != 0 || !slices.Equal(out, want) {
				t.Fatalf("status %d (error %q), call outputs %q, want 0 and %q", status, h.errText, out, want)
			}
			for i, e := range ends {
				if i == 3 {
					if e.status != 2 || !strings.Contains(e.reason, "message m3: a JSON object of 22 bytes does not fit an array of max_output_bytes 23") {
						t.Errorf("message 3 ends %+v, want rejected as too large", e)
					}
				} else if e.status != 0 {
					t.Errorf("message %d ends %+v, want ok", i, e)
				}
			}

			// A large batch with the default limit on a host that does not tell its own:
			// every array within 49152 bytes (fits every backend), and together they hold
			// every object in order.
			h, mod = bulkSink(t, name, nil)
			var bodies []string
			for i := range 40 {
				bodies = append(bodies, fmt.Sprintf(`{"i":%d,"pad":"%s"}`, i, strings.Repeat("p", 5000)))
			}
			h.resetBatch(msgs(bodies...))
			status = call(t, mod, "wqhost_handle_batch")
			_, out = h.endBatch(status)
			var all []string
			for _, o := range out {
				array := strings.TrimPrefix(o, ":")
				if len(array) > 49152 {
					t.Errorf("array of %d bytes, over the default 49152", len(array))
				}
				var objs []json.RawMessage
				if err := json.Unmarshal([]byte(array), &objs); err != nil {
					t.Fatalf("output is not a JSON array: %v", err)
				}
				for _, o := range objs {
					all = append(all, string(o))
				}
			}
			if status != 0 || len(out) != 5 || !slices.Equal(all, bodies) {
				t.Fatalf("status %d, %d arrays holding %d objects; want 0, 5 arrays of all 40 in order", status, len(out), len(all))
			}
		})
	}
}

// TestBulkSinkSingle: on a binding without batch: (wqhost_handle) the batch handler gets a
// batch of one: an array of one, or a reject by the message's verdict.
func TestBulkSinkSingle(t *testing.T) {
	for _, name := range bulkSinks {
		t.Run(name, func(t *testing.T) {
			h, mod := bulkSink(t, name, nil)
			meta := map[string]string{"id": "solo", "tenant": "t1", "binding": "sink"}
			h.reset([]byte(`{"k":"v"}`), meta)
			if e := h.endSingle(call(t, mod, "wqhost_handle")); e.status != 0 || !slices.Equal(e.outputs, []string{`:[{"k":"v"}]`}) {
				t.Fatalf("object: %+v, want ok with one array of one", e)
			}
			h.reset([]byte(`{"k":`), meta)
			if e := h.endSingle(call(t, mod, "wqhost_handle")); e.status != 2 || e.reason != "bulk-sink: message solo: the body is not valid JSON" || len(e.outputs) != 0 {
				t.Fatalf("bad JSON: %+v, want rejected naming the message", e)
			}
		})
	}
}

// TestBulkSinkFailures: a failed emit retries every message not rejected (and sends nothing);
// a bad max_output_bytes retries the batch rather than poisoning it.
func TestBulkSinkFailures(t *testing.T) {
	for _, name := range bulkSinks {
		t.Run(name, func(t *testing.T) {
			h, mod := bulkSink(t, name, nil)
			h.resetBatch(msgs(`{"a":1}`, `x`))
			h.emitCode = -3
			status := call(t, mod, "wqhost_handle_batch")
			ends, out := h.endBatch(status)
			if status != 1 || len(out) != 0 || ends[0].status != 1 || !strings.Contains(ends[0].reason, "too large") || ends[1].status != 2 {
				t.Fatalf("emit too large: status %d, outputs %q, endings %+v; want retry naming it, the bad one rejected", status, out, ends)
			}

			h, mod = bulkSink(t, name, map[string]string{"max_output_bytes": "lots"})
			h.resetBatch(msgs(`{"a":1}`))
			status = call(t, mod, "wqhost_handle_batch")
			if ends, _ := h.endBatch(status); status != 1 || !strings.Contains(ends[0].reason, `max_output_bytes "lots"`) {
				t.Fatalf("bad config: status %d, endings %+v; want retry naming the config", status, ends)
			}
		})
	}
}

// TestBulkSinkBuildsAgree: the Rust build's own JSON check accepts exactly what the Go
// builds' encoding/json (json.Valid and UTF-8) does, on bodies at the edges of the grammar.
func TestBulkSinkBuildsAgree(t *testing.T) {
	var bodies []string
	for _, v := range []string{
		`0`, `-0`, `-0.5e+7`, `1E9`, `01`, `1.`, `.5`, `+1`, `1e`, `-`, `true`, `tru`, `nul`, `null`,
		`""`, `"\u00e9"`, `"\u00G9"`, `"\x"`, `"\/"`, "\"\x01\"", "\"\x7f\"", "\"é😀\"", "\"\xc3\"",
		`[]`, `[1,]`, `[,1]`, `{}`, `{"a":}`, `{"a":1,}`, `{"a" : [ 1 , {} ] }`, `[1]]`, "\ufeff{}",
	} {
		bodies = append(bodies, v, `{"v":`+v+`}`)
	}
	bodies = append(bodies, strings.Repeat("[", 10000)+strings.Repeat("]", 10000), `{"a":`+strings.Repeat("[", 10000)+strings.Repeat("]", 10000)+`}`)
	var want []int32
	for i, b := range bodies {
		trimmed := strings.TrimLeft(b, " \t\r\n")
		if !json.Valid([]byte(b)) || !utf8.ValidString(b) || !strings.HasPrefix(trimmed, "{") {
			want = append(want, int32(i))
		}
	}
	for _, name := range bulkSinks {
		t.Run(name, func(t *testing.T) {
			h, mod := bulkSink(t, name, map[string]string{"max_output_bytes": "1000000"})
			h.resetBatch(msgs(bodies...))
			if status := call(t, mod, "wqhost_handle_batch"); status != 0 {
				t.Fatalf("status %d (error %q), want 0", status, h.errText)
			}
			var got []int32
			for i := range bodies {
				if v, ok := h.verdicts[int32(i)]; ok && v.status == 2 {
					got = append(got, int32(i))
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("rejected %v, want %v", got, want)
			}
		})
	}
}

// TestMessageHandlerOnBatchBinding: a module written with Handle (handler! in Rust) run
// through wqhost_handle_batch handles each message on its own: its result becomes the
// message's verdict and its outputs are tied to it.
func TestMessageHandlerOnBatchBinding(t *testing.T) {
	for _, name := range []string{"echo-go", "echo-tinygo", "echo-rust"} {
		t.Run(name, func(t *testing.T) {
			h, mod := reactor(t, name)
			bodies := []string{strings.Repeat("x", 70000), "hello", "", "short"}
			h.resetBatch(msgs(bodies...))
			status := call(t, mod, "wqhost_handle_batch")
			ends, out := h.endBatch(status)
			if status != 0 || len(out) != 0 {
				t.Fatalf("status %d (error %q), call outputs %d; want 0 and none", status, h.errText, len(out))
			}
			for i, e := range ends {
				if v, ok := h.verdicts[int32(i)]; !ok || v.status != 0 || !slices.Equal(e.outputs, []string{":" + bodies[i]}) {
					t.Errorf("message %d: verdict %+v (set %v), outputs of %d, want ok with its echo", i, v, ok, len(e.outputs))
				}
			}
			// After the batch call a plain call emits to the call again.
			h.reset([]byte("after"), nil)
			if e := h.endSingle(call(t, mod, "wqhost_handle")); e.status != 0 || !slices.Equal(e.outputs, []string{":after"}) || h.outputs[0].index != -1 {
				t.Fatalf("wqhost_handle after a batch call: %+v, want ok with one call output", e)
			}

			h.resetBatch(msgs("a", "b"))
			h.emitCode = -3
			status = call(t, mod, "wqhost_handle_batch")
			ends, _ = h.endBatch(status)
			for i, e := range ends {
				if e.status != 1 || !strings.Contains(e.reason, "too large") {
					t.Errorf("emit too large, message %d ends %+v, want retried naming it", i, e)
				}
			}
		})
	}
	for _, name := range []string{"billing-go", "billing-tinygo"} {
		t.Run(name, func(t *testing.T) {
			h, mod := reactor(t, name)
			h.config = map[string]string{"tax_rate": "0.2"}
			h.resetBatch(msgs(`{"id":"tx-1","account":"acme","currency":"EUR","amount":10}`, `{"id":`, `{"id":"tx-3","account":"acme","currency":"EUR","amount":1}`))
			status := call(t, mod, "wqhost_handle_batch")
			ends, _ := h.endBatch(status)
			if status != 0 {
				t.Fatalf("status %d, want 0", status)
			}
			if ends[0].status != 0 || len(ends[0].outputs) != 1 || !strings.Contains(ends[0].outputs[0], `"total_cents":1200`) {
				t.Errorf("message 0 ends %+v, want ok with its priced line", ends[0])
			}
			if ends[1].status != 2 || !strings.Contains(ends[1].reason, "malformed transaction JSON") || len(ends[1].outputs) != 0 {
				t.Errorf("message 1 ends %+v, want rejected as malformed", ends[1])
			}
			if ends[2].status != 0 || len(ends[2].outputs) != 1 || !strings.Contains(ends[2].outputs[0], `"id":"tx-3"`) {
				t.Errorf("message 2 ends %+v, want ok with its own priced line", ends[2])
			}
		})
	}
}

// TestBulkSinkDefaultsToHostLimit: without config the arrays follow the host's limit on an
// output (msg_meta max_output_bytes: the tenant's, or the backend's if smaller), and a
// configured max_output_bytes above it is cut to it, so no array is one emit refuses.
func TestBulkSinkDefaultsToHostLimit(t *testing.T) {
	obj := func(i int) string { return fmt.Sprintf(`{"i":%d,"pad":"%s"}`, i, strings.Repeat("p", 980)) } // about 1 KB
	for _, name := range bulkSinks {
		for _, config := range []map[string]string{nil, {"max_output_bytes": "60000"}} {
			t.Run(fmt.Sprintf("%s/config=%v", name, config), func(t *testing.T) {
				h, mod := bulkSink(t, name, config)
				var bodies []string
				for i := range 100 {
					bodies = append(bodies, obj(i))
				}
				ms := msgs(bodies...)
				ms[0].meta["max_output_bytes"] = "20000"
				h.resetBatch(ms)
				status := call(t, mod, "wqhost_handle_batch")
				_, out := h.endBatch(status)
				if status != 0 || len(out) < 5 {
					t.Fatalf("status %d (error %q), %d arrays; want 0 and at least 5 arrays of at most 20000 bytes", status, h.errText, len(out))
				}
				for _, o := range out {
					if n := len(strings.TrimPrefix(o, ":")); n > 20000 {
						t.Errorf("array of %d bytes, over the host's max_output_bytes 20000", n)
					}
				}
			})
		}
	}
}
