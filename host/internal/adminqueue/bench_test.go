package adminqueue

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener/local"
	"github.com/wqhost/wqhost/listener/queue"
)

// deadLettersN is how many dead letters BenchmarkDeadLetters1M fills its store with:
// $WQHOST_DEADLETTERS_N, else 20000 so that CI's -benchtime 1x run stays fast (the figures
// in docs/benchmarks.md are for 1000000).
func deadLettersN(b *testing.B) int {
	if s := os.Getenv("WQHOST_DEADLETTERS_N"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 100 {
			b.Fatalf("WQHOST_DEADLETTERS_N=%q: want an integer of at least 100", s)
		}
		return n
	}
	return 20000
}

// fillDeadLetters puts n dead letters of about 150 bytes into q, 10,000 per transaction: a
// tenth dead-lettered for "timeout" by handler version v2, the rest trapped in v1. It
// returns how many time-outs.
func fillDeadLetters(b *testing.B, q *local.Queue, n int) (timeouts int64) {
	b.Helper()
	ctx := context.Background()
	const chunk = 10000
	bodies := make([][]byte, 0, chunk)
	for i := 0; i < n; {
		k := min(chunk, n-i)
		// One reason per 1,000 (the attributes are per batch): every tenth thousand a time-out.
		for j := 0; j < k; j += 1000 {
			m := min(1000, k-j)
			reason, version := "wasm trap: unreachable at handle+0x1f", "sha256:v1"
			if (i+j)/1000%10 == 9 {
				reason, version = "timeout after 5s (fuel)", "sha256:v2"
				timeouts += int64(m)
			}
			bodies = bodies[:0]
			for x := range m {
				bodies = append(bodies, fmt.Appendf(nil, `{"order":%d,"customer":"c-%d","items":[{"sku":"A-1","qty":2}],"note":"%s"}`, i+j+x, (i+j+x)%977, strings.Repeat("x", 40)))
			}
			attrs := map[string]string{
				queue.AttrReason: reason, queue.AttrHandlerVersion: version, queue.AttrDequeueCount: "5",
				queue.AttrOriginalQueue: "acme/orders", queue.AttrDeadLetteredAt: time.Now().UTC().Format(time.RFC3339Nano),
				"wqhost.fuel": "812345",
			}
			if _, err := q.SendBatch(ctx, bodies, queue.SendOptions{Attributes: attrs}); err != nil {
				b.Fatal(err)
			}
		}
		i += k
	}
	return timeouts
}

// peakRSS is the process's peak resident set (VmHWM) in MB; resetPeakRSS starts it again
// from the current RSS (Linux; both are no-ops elsewhere).
func peakRSS() float64 {
	s, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range bytes.Split(s, []byte("\n")) {
		if f := strings.Fields(string(line)); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// BenchmarkDeadLetters1M fills a local store's poison queue with N dead letters (see
// deadLettersN), reopens it (cold cache), and measures what the console's dead-letter page
// costs: the first page of a listing (50, newest first, 120-byte previews), the dry-run
// count of a filter by reason, the count of a body substring, and the peak RSS of those
// (measured from the reopen). It prints
// "dead letters N: list first page Xms, filtered dry-run Yms, peak RSS Z MB".
func BenchmarkDeadLetters1M(b *testing.B) {
	n := deadLettersN(b)
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "queues.db")
	st, err := local.Open(ctx, path, local.Options{Sync: local.SyncNormal})
	if err != nil {
		b.Fatal(err)
	}
	q, _ := st.Queue(ctx, "acme/orders"+queue.PoisonSuffix)
	start := time.Now()
	timeouts := fillDeadLetters(b, q, n)
	fill := time.Since(start)
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
	st, err = local.Open(ctx, path, local.Options{Sync: local.SyncNormal})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	q, _ = st.Queue(ctx, "acme/orders"+queue.PoisonSuffix)
	resetPeakRSS()
	var list, count, body time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		items, next, err := ListDead(ctx, q, Query{Limit: 50})
		list += time.Since(t0)
		if err != nil || len(items) != 50 || next == "" {
			b.Fatalf("first page: %d items, next %q, %v", len(items), next, err)
		}
		t0 = time.Now()
		c, err := CountDead(ctx, q, Filter{Reason: "timeout"})
		count += time.Since(t0)
		if err != nil || c != timeouts {
			b.Fatalf("dry run counted %d (%v), want %d", c, err, timeouts)
		}
		t0 = time.Now()
		if c, err := CountDead(ctx, q, Filter{Body: `"customer":"c-976"`}); err != nil || c == 0 {
			b.Fatalf("body count %d, %v", c, err)
		}
		body += time.Since(t0)
	}
	b.StopTimer()
	per := func(d time.Duration) float64 { return float64(d) / float64(b.N) / float64(time.Millisecond) }
	rss := peakRSS()
	b.ReportMetric(per(list), "list-ms")
	b.ReportMetric(per(count), "dryrun-ms")
	b.ReportMetric(per(body), "bodycount-ms")
	b.ReportMetric(rss, "peak-rss-MB")
	fmt.Printf("dead letters %d: list first page %.1fms, filtered dry-run %.0fms, peak RSS %.0f MB\n", n, per(list), per(count), rss)
	fmt.Printf("dead letters %d: body-substring count %.0fms, fill %s\n", n, per(body), fill.Round(time.Millisecond))
}
