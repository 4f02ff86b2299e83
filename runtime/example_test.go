package runtime_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/wqhost/wqhost/examples/handlers"
	"github.com/wqhost/wqhost/runtime"
)

// The embedding path of the runtime: an engine (one per process), a tenant (its own wazero
// runtimes and limits), a module compiled once, a pool of warm instances for one binding, and
// a call per message. echo-rust is one of the committed example handlers: it emits each
// body unchanged to the binding's output queue.
func Example() {
	ctx := context.Background()
	e, err := runtime.NewEngine(ctx, runtime.EngineConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer e.Close(ctx)
	t, err := e.Tenant("acme", runtime.TenantLimits{})
	if err != nil {
		fmt.Println(err)
		return
	}
	wasm, err := handlers.Module("echo-rust")
	if err != nil {
		fmt.Println(err)
		return
	}
	m, err := e.Compile(ctx, "echo-rust.wasm", wasm, runtime.ABIWqhostV1)
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := t.NewPool(ctx, m, runtime.PoolConfig{Binding: "orders", OutputQueue: "shipped", Timeout: 10 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close(ctx)

	out, err := p.Call(ctx, &runtime.Input{ID: "m1", Queue: "orders", Body: []byte("hello")})
	if err != nil {
		fmt.Println("call failed:", err)
		return
	}
	defer out.Release()
	for _, o := range out.Outputs {
		fmt.Printf("emitted %q to %s\n", o.Body, o.Queue)
	}
	// Output:
	// emitted "hello" to shipped
}
