package runtime

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// BenchmarkOwnClientVsTransport compares the hand-written keep-alive client (keepAlive) with
// net/http's Transport on the same requests to a server 1 ms away (each answer is sent 1 ms
// after the request arrived), interleaved in one run, and prints the ratio of the p50s:
//
//	own client vs net/http.Transport, 1 ms server: R× (own/Transport)
//
// The own client is worth keeping only if R < 0.9 (it wins by more than 10%).
func BenchmarkOwnClientVsTransport(b *testing.B) {
	for _, size := range []int{0, 1 << 10} {
		b.Run(fmt.Sprintf("body=%d", size), func(b *testing.B) { benchOwnVsTransport(b, size) })
	}
}

func benchOwnVsTransport(b *testing.B, size int) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(time.Millisecond)
		_, _ = w.Write([]byte(`{"ok":true,"id":"0123456789abcdef"}`))
	}))
	defer srv.Close()
	d := &net.Dialer{Timeout: 5 * time.Second}
	tr := &http.Transport{DialContext: d.DialContext, ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 16, DisableCompression: true}
	defer tr.CloseIdleConnections()
	own := newKeepAlive(d.DialContext, 5*time.Second, maxHTTPHeaderBytes, tr)
	defer own.CloseIdleConnections()
	body := strings.Repeat("x", size)
	do := func(rt http.RoundTripper) time.Duration {
		s := time.Now()
		req, err := http.NewRequestWithContext(context.Background(), "POST", srv.URL+"/hook", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := (&http.Client{Transport: rt}).Do(req)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadAll(resp.Body); err != nil {
			b.Fatal(err)
		}
		_ = resp.Body.Close()
		return time.Since(s)
	}
	for range 20 {
		do(own)
		do(tr)
	}
	var to, tt []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		to = append(to, do(own))
		tt = append(tt, do(tr))
	}
	b.StopTimer()
	po, pt := p50(to), p50(tt)
	ratio := float64(po) / float64(pt)
	b.ReportMetric(float64(po.Nanoseconds()), "own-p50-ns")
	b.ReportMetric(float64(pt.Nanoseconds()), "transport-p50-ns")
	b.ReportMetric(ratio, "ratio")
	if b.N >= 100 {
		fmt.Printf("own client vs net/http.Transport, 1 ms server: %.3f× (own/Transport; body %d B: p50 %s own, %s Transport, %d requests each)\n", ratio, size, po, pt, b.N)
	}
}
