package runtime

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

var benchFixtures = []struct{ name, path string }{
	{"go", "../examples/handlers/echo-go/echo-go.wasm"},
	{"tinygo", "../examples/handlers/echo-tinygo/echo-tinygo.wasm"},
	{"rust", "../examples/handlers/echo-rust/echo-rust.wasm"},
}

// rawHost is the smallest wqhost module that lets an echo guest run: a fixed body, emit
// discarded. It is the floor the pooled path is compared with. It exports every function of
// the real module (those the echo call does not reach unchanged), so a guest importing any
// of them links.
func rawHost(rt wazero.Runtime, body []byte) wazero.HostModuleBuilder {
	b := rt.NewHostModuleBuilder(hostModuleName)
	for _, f := range allHostFuncs() {
		fn := f.fn
		switch f.name {
		case "msg_body_len":
			fn = func(_ context.Context, _ api.Module, s []uint64) { s[0] = uint64(len(body)) }
		case "msg_body":
			fn = func(_ context.Context, m api.Module, s []uint64) {
				m.Memory().Write(uint32(s[0]), body[:min(len(body), int(uint32(s[1])))])
				s[0] = uint64(min(len(body), int(uint32(s[1]))))
			}
		case "emit":
			fn = func(_ context.Context, _ api.Module, s []uint64) { s[0] = 0 }
		}
		b.NewFunctionBuilder().WithGoModuleFunction(fn, f.params, f.results).Export(f.name)
	}
	return b
}

// BenchmarkDispatch compares one echo call through the pool with a bare wazero call of the same
// export (raw) and with instantiating per message. Run:
// go test -run '^$' -bench Dispatch -benchmem ./runtime/
func BenchmarkDispatch(b *testing.B) {
	body := []byte("hello, benchmark")
	for _, fx := range benchFixtures {
		wasm, err := os.ReadFile(fx.path)
		if err != nil {
			b.Run(fx.name, func(b *testing.B) { b.Skipf("%s: %v", fx.path, err) })
			continue
		}
		// raw-timeout is the same call on a runtime with close-on-context-done and a
		// cancelable context: wazero's own price for a time limit (a watchdog goroutine per
		// call, an exit to Go on every loop back-edge), which pooled pays too.
		for _, raw := range []struct {
			name      string
			terminate bool
		}{{"raw", false}, {"raw-timeout", true}} {
			b.Run(fx.name+"/"+raw.name, func(b *testing.B) {
				ctx := context.Background()
				rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCloseOnContextDone(raw.terminate))
				defer rt.Close(ctx)
				wasi_snapshot_preview1.MustInstantiate(ctx, rt)
				if _, err := rawHost(rt, body).Instantiate(ctx); err != nil {
					b.Fatal(err)
				}
				mod, err := rt.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithStartFunctions("_initialize"))
				if err != nil {
					b.Fatal(err)
				}
				if raw.terminate {
					var cancel context.CancelFunc
					ctx, cancel = context.WithCancel(ctx)
					defer cancel()
				}
				fn := mod.ExportedFunction("wqhost_handle")
				stack := []uint64{0}
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					if err := fn.CallWithStack(ctx, stack); err != nil || stack[0] != 0 {
						b.Fatal(err, stack[0])
					}
				}
			})
		}
		for _, mode := range []struct {
			name    string
			timeout time.Duration
		}{{"pooled", time.Second}, {"pooled-notimeout", 0}} {
			b.Run(fx.name+"/"+mode.name, func(b *testing.B) {
				e := testEngine(b)
				ten, _ := e.Tenant("bench", TenantLimits{})
				m, err := e.Compile(context.Background(), fx.path, wasm, ABIWqhostV1)
				if err != nil {
					b.Fatal(err)
				}
				p, err := ten.NewPool(context.Background(), m, PoolConfig{Binding: "b", OutputQueue: "out", MinInstances: 1, MaxInstances: 1, Timeout: mode.timeout})
				if err != nil {
					b.Fatal(err)
				}
				defer p.Close(context.Background())
				// A caller's own Input and Result, reused as a listener worker would.
				in, out := &Input{ID: "m", Body: body}, &Result{}
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					if err := p.CallInto(context.Background(), in, out); err != nil || out.Verdict != VerdictOK {
						b.Fatal(err)
					}
				}
			})
		}
		b.Run(fx.name+"/instantiate", func(b *testing.B) {
			e := testEngine(b)
			ten, _ := e.Tenant("bench", TenantLimits{})
			m, err := e.Compile(context.Background(), fx.path, wasm, ABIWqhostV1)
			if err != nil {
				b.Fatal(err)
			}
			p, err := ten.NewPool(context.Background(), m, PoolConfig{Binding: "b", OutputQueue: "out", MaxInstances: 1, Timeout: time.Second})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close(context.Background())
			in, out := &Input{ID: "m", Body: body}, &Result{}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				inst, _, err := p.newInstance(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				if _, err := p.run(context.Background(), inst, in, out); err != nil {
					b.Fatal(err)
				}
				p.discard(inst)
			}
		})
	}
}

// BenchmarkBatchDispatch compares the cost per message of one CallBatch of 100 no-op messages
// with that of 100 single Calls, on testdata/batchguest (its wqhost_handle and
// wqhost_handle_batch run the same script, and an empty body is a no-op), and reports both
// and their ratio; ns/op is the two together. Run:
// go test -run '^$' -bench BatchDispatch -benchmem ./runtime/
func BenchmarkBatchDispatch(b *testing.B) {
	const n = 100
	ctx := context.Background()
	p := batchPool(b, testEngine(b), PoolConfig{MinInstances: 1, MaxInstances: 1, Timeout: time.Second})
	ins := make([]*Input, n)
	for i := range ins {
		ins[i] = &Input{ID: fmt.Sprintf("m%d", i)}
	}
	var single, batched time.Duration
	rounds := 0
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		for _, in := range ins {
			if out, err := p.Call(ctx, in); err != nil || out.Verdict != VerdictOK {
				b.Fatal(out, err)
			}
		}
		mid := time.Now()
		bo, err := p.CallBatch(ctx, ins)
		if err != nil || bo.Messages[n-1].Verdict != VerdictOK {
			b.Fatal(bo, err)
		}
		batched += time.Since(mid)
		single += mid.Sub(start)
		rounds++
	}
	b.ReportMetric(float64(single.Nanoseconds())/float64(rounds*n), "ns/msg-single")
	b.ReportMetric(float64(batched.Nanoseconds())/float64(rounds*n), "ns/msg-batch")
	b.ReportMetric(float64(single)/float64(batched), "single/batch")
}
