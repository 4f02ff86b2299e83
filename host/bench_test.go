package host

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/listener/queue"
)

// BenchmarkHostThroughput pushes b.N messages through a whole host (listener, echo-go
// module, output sends) and reports end-to-end msg/s, per backend.
func BenchmarkHostThroughput(b *testing.B) {
	for _, backend := range []string{"memory", "local"} {
		b.Run(backend, func(b *testing.B) {
			dir := b.TempDir()
			cfg, err := config.Parse([]byte(fmt.Sprintf(`
data_dir: %s
cache_dir: %s
admin: {addr: "off"}
backends:
  q: {type: %s, sync: normal}
tenants:
  default:
    bindings:
      echo: {backend: q, queue: in, output: out, module: 'builtin:echo-go'}
`, filepath.Join(dir, "data"), cacheDir, backend)), dir)
			if err != nil {
				b.Fatal(err)
			}
			h, err := New(context.Background(), cfg, testLogger(nil))
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			in, _ := h.OpenQueue(ctx, "default", "in")
			out, _ := h.OpenQueue(ctx, "default", "out")
			body := []byte(`{"id":"tx-1","account":"acme","currency":"EUR","amount":10}`)
			for range b.N {
				if _, err := in.Send(ctx, body, queue.SendOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			rctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			b.ResetTimer()
			start := time.Now()
			go func() { done <- h.Run(rctx) }()
			for {
				d, err := out.Depth(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if d >= int64(b.N) {
					break
				}
				time.Sleep(2 * time.Millisecond)
			}
			el := time.Since(start)
			b.StopTimer()
			cancel()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/el.Seconds(), "msg/s")
		})
	}
}
