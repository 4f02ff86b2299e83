package runtime

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkOutbound compares one outbound request made by a pooled guest (the whole
// Pool.Call of a webhook-delivery example: the guest reads its message (and, on its first
// message, its config), the SDK builds the request, the host sends it under the policy, the
// guest reads the body and checks the status) with the same request made by plain net/http,
// to the same loopback server, interleaved in one run. It prints the ratio of the p50s:
//
//	outbound request cost vs net/http: R×
func BenchmarkOutbound(b *testing.B) {
	for _, mod := range []string{"webhook-delivery-go", "webhook-delivery-tinygo", "webhook-delivery-rust"} {
		b.Run(mod, func(b *testing.B) { benchOutbound(b, mod) })
	}
}

func benchOutbound(b *testing.B, mod string) {
	payload := []byte(`{"ok":true,"id":"0123456789abcdef"}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = w.Write(payload)
	}))
	defer srv.Close()
	p := examplePool(b, mod, PoolConfig{
		Binding: "hooks", MinInstances: 1, MaxInstances: 1,
		Config: map[string]string{"url": srv.URL + "/hook"},
		HTTP:   &HTTPPolicy{Allow: rules(b, "http://127.0.0.1:*/hook")},
	})
	in := &Input{ID: "m-1", Body: []byte(`{"event":"paid"}`)}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	defer client.CloseIdleConnections()
	plain := func() {
		req, err := http.NewRequestWithContext(context.Background(), "POST", srv.URL+"/hook", strings.NewReader(`{"event":"paid"}`))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "m-1")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadAll(resp.Body); err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
	}
	guest := func() {
		out, err := p.Call(context.Background(), in)
		if err != nil || out.Verdict != VerdictOK || out.HTTP.BytesIn != int64(len(payload)) {
			b.Fatalf("guest call: %v %+v", err, out)
		}
	}
	// Warm both connections and the instance.
	for range 50 {
		plain()
		guest()
	}
	var tg, tp []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s := time.Now()
		guest()
		tg = append(tg, time.Since(s))
		s = time.Now()
		plain()
		tp = append(tp, time.Since(s))
	}
	b.StopTimer()
	pg, pp := p50(tg), p50(tp)
	ratio := float64(pg) / float64(pp)
	b.ReportMetric(float64(pg.Nanoseconds()), "guest-p50-ns")
	b.ReportMetric(float64(pp.Nanoseconds()), "nethttp-p50-ns")
	b.ReportMetric(ratio, "ratio")
	if b.N >= 100 {
		fmt.Printf("outbound request cost vs net/http: %.2f× (%s: p50 %s guest, %s net/http, %d requests each)\n", ratio, mod, pg, pp, b.N)
	}
}

func p50(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
