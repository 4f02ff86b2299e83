package host

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/wqhost/wqhost/internal/wasmtest"
)

// Issue 26's host-call loops through the whole host: a healthy echo binding drains its backlog
// beside one binding (another tenant, default pool of 4 instances) whose every message loops
// on one host call asking for as much work as its memory allows, each class of
// runtime.TestHostCallLoopsStopAtTheTimeLimit that needs no server.

// hostCallLoop is a wqhost/v1 module whose wqhost_handle calls import 0 for ever.
func hostCallLoop(t testing.TB, name string, imp wasmtest.Import, setup, call []byte) string {
	const huge = 64 << 20
	wasm := wasmtest.Spec{
		Imports: []wasmtest.Import{imp},
		Funcs: []wasmtest.Func{
			{Export: "wqhost_abi_v1"},
			{Export: "wqhost_feature_http_v1"},
			{Export: "wqhost_handle", Results: []byte{wasmtest.I32}, Body: append(append(setup, wasmtest.Forever(call)...), wasmtest.I32Const(0)...)},
		},
		MemPages: huge/65536 + 16,
	}.Bytes()
	path := filepath.Join(t.TempDir(), name+".wasm")
	if err := os.WriteFile(path, wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// hostCallLoops are the classes: name, module path.
func hostCallLoops(t testing.TB) [][2]string {
	const huge, scratch = 64 << 20, 64<<20 + 4096
	i32 := func(n int) []byte { return bytes.Repeat([]byte{wasmtest.I32}, n) }
	res := []byte{wasmtest.I32}
	wasi := func(name string, n int) wasmtest.Import {
		return wasmtest.Import{Module: "wasi_snapshot_preview1", Name: name, Params: i32(n), Results: res}
	}
	host := func(name string, n int, results []byte) wasmtest.Import {
		return wasmtest.Import{Module: "wqhost", Name: name, Params: i32(n), Results: results}
	}
	call := func(args ...int32) []byte { return append(wasmtest.I32s(args...), wasmtest.Call(0)...) }
	drop := func(b []byte) []byte { return append(b, wasmtest.Drop...) }
	var out [][2]string
	for _, c := range []struct {
		name        string
		imp         wasmtest.Import
		setup, body []byte
	}{
		// The reference: a guest spinning in its own code, which the fuel counter held before.
		{"guest code only (reference)", wasi("random_get", 2), nil, nil},
		{"wasi random_get 64 MiB", wasi("random_get", 2), nil, drop(call(0, huge))},
		{"wasi fd_write 1M iovecs", wasi("fd_write", 4), wasmtest.MemoryFill(0, 1, 8<<20), drop(call(1, 0, 1<<20, scratch))},
		{"wasi fd_read 1M iovecs", wasi("fd_read", 4), nil, drop(call(0, 0, 1<<20, scratch))},
		{"msg_body_len", host("msg_body_len", 0, res), nil, drop(call())},
		{"msg_meta 64 MiB key", host("msg_meta", 4, res), nil, drop(call(0, huge, 0, 0))},
		{"set_error 64 MiB", host("set_error", 2, nil), nil, call(0, huge)},
		{"http_request 64 MiB URL", host("http_request", 10, res), nil, drop(call(0, 0, 0, huge, 0, 0, 0, 0, 0, 0))},
	} {
		out = append(out, [2]string{c.name, hostCallLoop(t, fmt.Sprintf("loop%d", len(out)), c.imp, c.setup, c.body)})
	}
	return out
}

// runBeside returns the healthy binding's throughput in messages per second, beside a
// binding of module (none when empty) in another tenant with a backlog it loops on.
func runBeside(t testing.TB, module string) float64 {
	t.Helper()
	echo := abs(t, "../examples/handlers/echo-rust/echo-rust.wasm")
	limits := fmt.Sprintf("    limits: {timeout: %s}\n", spinTimeout)
	tenants := "  b:\n" + limits + "    bindings:\n" +
		fmt.Sprintf("      echo: {queue: in, output: out, module: %q, backoff: {min: 5ms, max: 20ms}}\n", echo)
	if module != "" {
		tenants += "  a:\n" + limits + "    bindings:\n" +
			fmt.Sprintf("      loop: {queue: loop, module: %q, max_dequeue_count: 50, backoff: {min: 5ms, max: 20ms}, poison: {base_delay: 5ms, max_delay: 10ms}}\n", module)
	}
	h, _ := newHostWith(t, "", tenants)
	stop := run(t, h)
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	ctx := context.Background()
	if module != "" {
		q, err := h.OpenQueue(ctx, "a", "loop")
		if err != nil {
			t.Fatal(err)
		}
		backlog := make([][]byte, spinBacklog)
		for i := range backlog {
			backlog[i] = []byte("x")
		}
		if _, err := sendBatch(t, q, backlog, 0); err != nil {
			t.Fatal(err)
		}
		_ = h.Notify("a", "loop")
		time.Sleep(3 * spinTimeout) // the loops under way, and whatever the host does about them
	}
	bodies := make([][]byte, spinHealthy)
	for i := range bodies {
		bodies[i] = fmt.Appendf(nil, "h-%d", i)
	}
	q, err := h.OpenQueue(ctx, "b", "in")
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now().Add(time.Second)
	if _, err := sendBatch(t, q, bodies, time.Until(begin)); err != nil {
		t.Fatal(err)
	}
	deadline := begin.Add(120 * time.Second)
	for depth(t, h, "b", "out") < spinHealthy {
		if time.Now().After(deadline) {
			t.Fatalf("the healthy binding drained %d of %d in 120s", depth(t, h, "b", "out"), spinHealthy)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return spinHealthy / time.Since(begin).Seconds()
}

// BenchmarkHealthyBesideHostCallLoops measures issue 26's target through the host with its
// defaults (breaker, suspect slots): a healthy binding's throughput beside a binding of
// another tenant whose every message loops on one host call (500 ms limit), over its
// throughput alone measured just before (the median of five such pairs), per class; it
// prints the lowest, the line
// docs/guarantees.md quotes (target ≥ 0.5). runtime's benchmark of the same name measures
// the runtime alone, without the host's gating.
//
//	go test -run '^$' -bench HealthyBesideHostCallLoops -benchtime 1x ./host
func BenchmarkHealthyBesideHostCallLoops(b *testing.B) {
	for b.Loop() {
		// One measurement per run, below.
	}
	lowest, lowestName := 2.0, ""
	classes, pairs := hostCallLoops(b), 5
	if testing.Short() {
		// CI's smoke run (every benchmark once): the reference and one class, one pair.
		classes, pairs = classes[:2], 1
	}
	for _, c := range classes {
		// Five pairs, alone then beside, and the median of their ratios: the machine's
		// other load moves both runs of a pair alike.
		ratios := make([]float64, pairs)
		for i := range ratios {
			alone := runBeside(b, "")
			ratios[i] = runBeside(b, c[1]) / alone
		}
		slices.Sort(ratios)
		ratio := ratios[len(ratios)/2]
		fmt.Printf("  %-30s %.2f (pairs %.2f)\n", c[0], ratio, ratios)
		if ratio < lowest && c[0] != "guest code only (reference)" {
			lowest, lowestName = ratio, c[0]
		}
	}
	fmt.Printf("healthy ratio beside host-call loops: %.2f (lowest: %s)\n", lowest, lowestName)
	b.ReportMetric(lowest, "healthy-ratio")
}
