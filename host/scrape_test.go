package host

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestMetricsScrapeCostsNoQueueCall: /metrics and /v1/status show the listeners' cached
// depths, so scraping them costs no queue call (a depth read is billed like any other call
// on Azure). An idle binding on the default local backend is scraped 3600 times, an hour
// of one scrape a second: its queue calls before and after are the same. (Its idle
// back-off is set long so that its own polls, a few a minute at first, cannot fall inside.)
//
//	go test -run MetricsScrape -v ./host
func TestMetricsScrapeCostsNoQueueCall(t *testing.T) {
	h, _ := newHost(t, fmt.Sprintf("  default:\n    bindings:\n      echo: {queue: in, output: out, module: %q, backoff: {min: 30m, max: 1h}}\n", abs(t, flakyWasm)))
	run(t, h)
	send(t, h, "default", "in", "a", "b", "c")
	eventually(t, "the messages handled and the drained depth shown", func() bool {
		s := bindingStatus(t, h, "default", "echo")
		return s.Processed == 3 && s.Depth == 0 && s.DeadLetterDepth == 0
	})
	calls := func() uint64 {
		q := bindingStatus(t, h, "default", "echo").QueueCalls
		return q.Receives + q.Deletes + q.Updates + q.Sends + q.DepthQueries
	}
	// Quiet first: right after a drain the listener still reads its depths and may poll
	// once more; those calls are not the scrapes'.
	settled, last := 0, calls()
	eventually(t, "the idle binding making no queue call for half a second", func() bool {
		time.Sleep(100 * time.Millisecond)
		if c := calls(); c != last {
			settled, last = 0, c
			return false
		}
		settled++
		return settled >= 5
	})
	before := calls()
	q0 := bindingStatus(t, h, "default", "echo").QueueCalls
	handler := h.AdminHandler()
	for i := range 3600 {
		path := "/metrics"
		if i%2 == 1 {
			path = "/v1/status"
		}
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
		}
	}
	after := calls()
	if after != before {
		t.Errorf("3600 scrapes of /metrics and /v1/status made %d queue calls, want 0 (before %+v, after %+v)",
			after-before, q0, bindingStatus(t, h, "default", "echo").QueueCalls)
	}
	fmt.Printf("status scrape calls/hour: %d (3600 scrapes of /metrics and /v1/status, host on the local backend)\n", after-before)
}
