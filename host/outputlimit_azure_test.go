package host

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/wqhost/wqhost/listener/azure/azuritetest"
)

// TestBulkSinkDefaultFitsAzure, on Azurite: the bulk-sink example with its default settings
// on a batching binding (batches of 100), 200 JSON bodies of 1 KB. Its arrays used to be cut
// at a fixed 60000 bytes, which base64 makes 80000 characters, above Azure's 65536: every
// send failed and 64 of 200 healthy messages ended in the poison queue. Now the host tells
// the guest the effective output limit (49152 on Azure under base64), the arrays fit, and
// nothing is dead-lettered.
func TestBulkSinkDefaultFitsAzure(t *testing.T) {
	az := azuritetest.Start(t)
	t.Setenv("WQHOST_TEST_AZURITE", az.ConnectionString())
	for _, module := range []string{"bulk-sink-tinygo", "bulk-sink-rust", "bulk-sink-go"} {
		t.Run(module, func(t *testing.T) {
			queue := strings.ReplaceAll(module, "bulk-sink-", "rec-")
			h, _ := newHostWith(t, "backends:\n  az: {type: azure, connection_string_env: WQHOST_TEST_AZURITE, create_queues: true}\n", fmt.Sprintf(`
  default:
    bindings:
      bulk:
        backend: az
        queue: %s
        output: %s-out
        module: builtin:%s
        batch: {max_messages: 100, max_wait: 2s}
`, queue, queue, module))
			b := h.bindingNamed("default", "bulk")
			if got := b.poolConfig().MaxOutputBytes; got != 49152 {
				t.Fatalf("effective max_output_bytes on Azure (base64) = %d, want 49152", got)
			}
			bodies := make([]string, 200)
			for i := range bodies {
				bodies[i] = fmt.Sprintf(`{"i":%d,"pad":"%s"}`, i, strings.Repeat("p", 1000))
			}
			send(t, h, "default", queue, bodies...)
			run(t, h)
			eventually(t, "200 messages settled", func() bool {
				s := b.lis.State()
				return s.Processed+s.Poisoned >= 200
			})
			if s := b.lis.State(); s.Poisoned != 0 || s.Processed != 200 {
				t.Fatalf("processed %d, poisoned %d (failed %d); want 200 and 0", s.Processed, s.Poisoned, s.Failed)
			}
			seen := map[int]bool{}
			for _, o := range bodiesOf(t, h, "default", queue+"-out") {
				if len(o) > 49152 {
					t.Errorf("array of %d bytes, over the effective limit 49152", len(o))
				}
				var arr []struct{ I int }
				if err := json.Unmarshal([]byte(o), &arr); err != nil {
					t.Fatalf("output is not a JSON array: %v", err)
				}
				for _, r := range arr {
					seen[r.I] = true
				}
			}
			if len(seen) != 200 {
				t.Errorf("the arrays hold %d distinct records, want 200", len(seen))
			}
			s := b.lis.State()
			t.Logf("azurite %s default batch: sent=200 processed=%d dead-lettered=%d records out=%d", module, s.Processed, s.Poisoned, len(seen))
		})
	}
}

// TestOutputLimitIsTheTenantsOnLocal: on the local store (64 MiB bodies) the effective limit
// is the tenant's max_output_bytes, default and configured.
func TestOutputLimitIsTheTenantsOnLocal(t *testing.T) {
	for _, tc := range []struct {
		limits string
		want   int
	}{{"", 1 << 20}, {"    limits: {max_output_bytes: 100KiB}\n", 100 << 10}} {
		h, _ := newHost(t, "  default:\n"+tc.limits+"    bindings:\n      e:\n        queue: in\n        module: builtin:echo-tinygo\n")
		pc := h.bindingNamed("default", "e").poolConfig()
		if pc.MaxOutputBytes != tc.want || pc.MaxOutputTotalBytes != 4*tc.want {
			t.Errorf("limits %q: max_output_bytes %d, total %d; want %d and %d", tc.limits, pc.MaxOutputBytes, pc.MaxOutputTotalBytes, tc.want, 4*tc.want)
		}
	}
}
