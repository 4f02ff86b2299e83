package runtime

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wqhost/wqhost/internal/wasmtest"
)

// Hostile guests whose loop body is one host call doing as much work as the guest can ask for
// (charge.go): written from docs/abi.md as raw modules, each must end at its time limit.

const (
	hugeLen   = 64 << 20 // a length as large as the guests' memory allows
	hugePages = hugeLen/PageBytes + 16
	scratch   = hugeLen + 4096 // a result pointer past the huge ranges
	// limitMargin is how soon after its limit a looping guest must have returned
	// (docs/guarantees.md, "Hostile guests").
	limitMargin = 100 * time.Millisecond
)

var i32Result = []byte{wasmtest.I32}

func i32Params(n int) []byte { return bytes.Repeat([]byte{wasmtest.I32}, n) }

// wasiFn and hostFn are imports of WASI preview 1 and of the wqhost module.
func wasiFn(name string, params ...byte) wasmtest.Import {
	return wasmtest.Import{Module: "wasi_snapshot_preview1", Name: name, Params: params, Results: i32Result}
}

func wqhostFn(name string, params, results []byte) wasmtest.Import {
	return wasmtest.Import{Module: hostModuleName, Name: name, Params: params, Results: results}
}

// call is the code calling import fn with the i32 arguments args.
func call(fn int, args ...int32) []byte { return append(wasmtest.I32s(args...), wasmtest.Call(fn)...) }

// hostileGuest is a wqhost/v1 module whose wqhost_handle runs setup, then body for ever.
type hostileGuest struct {
	name    string
	imports []wasmtest.Import
	setup   []byte
	body    []byte
	data    []wasmtest.Data
	body1M  bool // the message's body is 1 MiB
	http    bool // exports the http_v1 marker; the pool may request the test server
}

func (g hostileGuest) wasm() []byte {
	fs := []wasmtest.Func{{Export: "wqhost_abi_v1"}}
	if g.http {
		fs = append(fs, wasmtest.Func{Export: "wqhost_feature_http_v1"})
	}
	fs = append(fs, wasmtest.Func{Export: "wqhost_handle", Results: i32Result,
		Body: concat(g.setup, wasmtest.Forever(g.body), wasmtest.I32Const(0))})
	return wasmtest.Spec{Imports: g.imports, Funcs: fs, MemPages: hugePages, Data: g.data}.Bytes()
}

// hostileGuests are the host-call classes of docs/guarantees.md, each a loop of its most
// expensive call (the cheap calls loop too: a per-call charge must reach the check).
func hostileGuests(url string) []hostileGuest {
	i64, i32 := wasmtest.I64Const, wasmtest.I32Const
	drop := wasmtest.Drop
	return []hostileGuest{
		{name: "wasi random_get 64 MiB", imports: []wasmtest.Import{wasiFn("random_get", i32Params(2)...)},
			body: concat(call(0, 0, hugeLen), drop)},
		// 1M iovecs of 16 MiB each ({0x01010101, 0x01010101}) to stdout.
		{name: "wasi fd_write 1M iovecs", imports: []wasmtest.Import{wasiFn("fd_write", i32Params(4)...)},
			setup: wasmtest.MemoryFill(0, 1, 8<<20), body: concat(call(0, 1, 0, 1<<20, scratch), drop)},
		// 1M empty iovecs, each skipped at once by wazero: a million per call.
		{name: "wasi fd_read 1M iovecs", imports: []wasmtest.Import{wasiFn("fd_read", i32Params(4)...)},
			body: concat(call(0, 0, 0, 1<<20, scratch), drop)},
		{name: "wasi path_open 64 MiB path", imports: []wasmtest.Import{wasiFn("path_open",
			wasmtest.I32, wasmtest.I32, wasmtest.I32, wasmtest.I32, wasmtest.I32, wasmtest.I64, wasmtest.I64, wasmtest.I32, wasmtest.I32)},
			body: concat(wasmtest.I32s(3, 0, 0, hugeLen, 0), i64(0), i64(0), wasmtest.I32s(0, scratch), wasmtest.Call(0), drop)},
		{name: "wasi poll_oneoff 500k subscriptions", imports: []wasmtest.Import{wasiFn("poll_oneoff", i32Params(4)...)},
			body: concat(call(0, 0, 24<<20, 500_000, scratch), drop)},
		{name: "wasi clock_time_get", imports: []wasmtest.Import{wasiFn("clock_time_get", wasmtest.I32, wasmtest.I64, wasmtest.I32)},
			body: concat(i32(0), i64(0), i32(scratch), wasmtest.Call(0), drop)},
		{name: "msg_body 1 MiB", imports: []wasmtest.Import{wqhostFn("msg_body", i32Params(2), i32Result)},
			body: concat(call(0, 0, 1<<20), drop), body1M: true},
		{name: "msg_body_len", imports: []wasmtest.Import{wqhostFn("msg_body_len", nil, i32Result)},
			body: concat(call(0), drop)},
		{name: "msg_meta 64 MiB key", imports: []wasmtest.Import{wqhostFn("msg_meta", i32Params(4), i32Result)},
			body: concat(call(0, 0, hugeLen, 0, 0), drop)},
		{name: "batch_meta 64 MiB key", imports: []wasmtest.Import{wqhostFn("batch_meta", i32Params(5), i32Result)},
			body: concat(call(0, 0, 0, hugeLen, 0, 0), drop)},
		{name: "config_get 64 MiB key", imports: []wasmtest.Import{wqhostFn("config_get", i32Params(4), i32Result)},
			body: concat(call(0, 0, hugeLen, 0, 0), drop)},
		{name: "batch_body 1 MiB", imports: []wasmtest.Import{wqhostFn("batch_body", i32Params(3), i32Result)},
			body: concat(call(0, 0, 0, 1<<20), drop), body1M: true},
		{name: "emit 1 MiB", imports: []wasmtest.Import{wqhostFn("emit", i32Params(4), i32Result)},
			body: concat(call(0, 0, 0, 0, 1<<20), drop)},
		{name: "batch_emit 1 MiB", imports: []wasmtest.Import{wqhostFn("batch_emit", i32Params(5), i32Result)},
			body: concat(call(0, 0, 0, 0, 0, 1<<20), drop)},
		{name: "set_error 64 MiB", imports: []wasmtest.Import{wqhostFn("set_error", i32Params(2), nil)},
			body: call(0, 0, hugeLen)},
		{name: "batch_verdict 64 MiB reason", imports: []wasmtest.Import{wqhostFn("batch_verdict",
			[]byte{wasmtest.I32, wasmtest.I32, wasmtest.I64, wasmtest.I32, wasmtest.I32}, i32Result)},
			body: concat(wasmtest.I32s(0, 5), i64(0), wasmtest.I32s(0, hugeLen), wasmtest.Call(0), drop)}, // status 5: no verdict, the call goes on
		{name: "log 64 MiB", imports: []wasmtest.Import{wqhostFn("log", i32Params(3), nil)},
			body: call(0, 0, 0, hugeLen)},
		{name: "http_request 64 MiB URL", http: true, imports: []wasmtest.Import{wqhostFn("http_request", i32Params(10), i32Result)},
			body: concat(call(0, 0, 0, 0, hugeLen, 0, 0, 0, 0, 0, 0), drop)},
		// One real response (the test server's), then its header with a 64 MiB name.
		{name: "http_header 64 MiB name", http: true,
			imports: []wasmtest.Import{wqhostFn("http_request", i32Params(10), i32Result), wqhostFn("http_header", i32Params(5), i32Result)},
			data:    []wasmtest.Data{{Offset: scratch + 64, Bytes: []byte(url)}},
			setup:   concat(call(0, 0, 0, scratch+64, int32(len(url)), 0, 0, 0, 0, 0, 0), drop),
			body:    concat(call(1, 1, 0, hugeLen, 0, 0), drop)},
		{name: "http_body_read, http_status, http_error", http: true,
			imports: []wasmtest.Import{wqhostFn("http_request", i32Params(10), i32Result), wqhostFn("http_body_read", i32Params(3), i32Result),
				wqhostFn("http_status", i32Params(1), i32Result), wqhostFn("http_error", i32Params(2), i32Result)},
			data:  []wasmtest.Data{{Offset: scratch + 64, Bytes: []byte(url)}},
			setup: concat(call(0, 0, 0, scratch+64, int32(len(url)), 0, 0, 0, 0, 0, 0), drop),
			body:  concat(call(1, 1, 0, hugeLen), drop, call(2, 1), drop, call(3, 0, hugeLen), drop)},
	}
}

// hostileServer answers every request with a header and a short body.
func hostileServer(t testing.TB) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-A", "b")
		fmt.Fprint(w, "hello")
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/x"
}

// hostilePool is a pool of g's module with the time limit limit and n warm instances.
func hostilePool(t testing.TB, e *Engine, g hostileGuest, limit time.Duration, n int) *Pool {
	t.Helper()
	ten, err := e.Tenant("t-hostile", TenantLimits{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := e.Compile(context.Background(), g.name+".wasm", g.wasm(), ABIWqhostV1)
	if err != nil {
		t.Fatalf("%s: %v", g.name, err)
	}
	if m.c.fuel == nil {
		t.Fatalf("%s: not instrumented", g.name)
	}
	cfg := PoolConfig{Binding: "b", MinInstances: n, MaxInstances: n, Timeout: limit, OutputQueue: "out", Config: map[string]string{"k": "v"}}
	if g.http {
		cfg.HTTP = &HTTPPolicy{Allow: rules(t, "http://127.0.0.1:*")}
	}
	p, err := ten.NewPool(context.Background(), m, cfg)
	if err != nil {
		t.Fatalf("%s: %v", g.name, err)
	}
	t.Cleanup(func() {
		// Bounded: a guest that never stopped (the failure under test) holds its call.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Close(ctx)
	})
	return p
}

// timedCall calls p with in under ctx and returns how long it took, or an error when it took
// a minute, far above any bound here: only a guest that never stops gets there.
func timedCall(ctx context.Context, p *Pool, in *Input) (time.Duration, error) {
	done := make(chan error, 1)
	start := time.Now()
	go func() { _, err := p.Call(ctx, in); done <- err }()
	select {
	case err := <-done:
		return time.Since(start), err
	case <-time.After(time.Minute):
		return 0, errors.New("the guest did not stop within a minute")
	}
}

func (g hostileGuest) input() *Input {
	in := &Input{ID: "m-hostile", Queue: "jobs", InsertedAt: time.Unix(1700000000, 0), DequeueCount: 1}
	if g.body1M {
		in.Body = make([]byte, 1<<20)
	}
	return in
}

// withinBound runs call until it returns by bound, at most three times: a run over the bound
// on a busy machine may be the machine's (the process descheduled), three in a row are the
// guest's. It fails t with the last run's error check or durations.
func withinBound(t *testing.T, bound time.Duration, call func() (time.Duration, error)) {
	t.Helper()
	var took []time.Duration
	for range 3 {
		d, err := call()
		if err != nil {
			t.Fatal(err)
		}
		if d <= bound {
			return
		}
		took = append(took, d)
	}
	t.Fatalf("returned after %v, want within %v", took, bound)
}

// TestHostCallLoopsStopAtTheTimeLimit: a guest looping on any host call, each asking for as
// much work as its memory allows (64 MiB of random bytes, a million iovecs, 64 MiB keys,
// names, paths and URLs, 1 MiB bodies), fails with the time limit and returns within the
// limit plus 100 ms, measured from the call's start.
func TestHostCallLoopsStopAtTheTimeLimit(t *testing.T) {
	e := testEngine(t)
	url := hostileServer(t)
	const limit = 300 * time.Millisecond
	for _, g := range hostileGuests(url) {
		t.Run(g.name, func(t *testing.T) {
			p := hostilePool(t, e, g, limit, 1)
			withinBound(t, limit+limitMargin, func() (time.Duration, error) {
				took, err := timedCall(context.Background(), p, g.input())
				if !errors.Is(err, ErrTimeout) {
					return 0, fmt.Errorf("err = %v, want the time limit", err)
				}
				return took, nil
			})
		})
	}
}

// TestHostCallLoopsStopWhenTheCallerLeaves: the caller's context ending (a shutdown's grace
// over) stops a guest looping on host calls as promptly as its time limit would, however far
// that limit is.
func TestHostCallLoopsStopWhenTheCallerLeaves(t *testing.T) {
	e := testEngine(t)
	url := hostileServer(t)
	for _, g := range hostileGuests(url) {
		switch g.name {
		case "wasi random_get 64 MiB", "wasi fd_write 1M iovecs", "wasi fd_read 1M iovecs", "msg_body 1 MiB", "msg_meta 64 MiB key", "http_header 64 MiB name":
		default:
			continue
		}
		t.Run(g.name, func(t *testing.T) {
			p := hostilePool(t, e, g, time.Hour, 1)
			withinBound(t, limitMargin, func() (time.Duration, error) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				done := make(chan error, 1)
				go func() { _, err := p.Call(ctx, g.input()); done <- err }()
				time.Sleep(50 * time.Millisecond)
				cancel()
				cancelled := time.Now()
				select {
				case err := <-done:
					if !errors.Is(err, context.Canceled) {
						return 0, fmt.Errorf("err = %v, want the caller's context.Canceled", err)
					}
					return time.Since(cancelled), nil
				case <-time.After(time.Minute): // far above the bound: only a guest that never stops gets here
					return 0, errors.New("the guest did not stop after its caller left")
				}
			})
		})
	}
}

// TestStdioHostCallLoopStops: a wasi-stdio command looping on random_get of 64 MiB (no fuel:
// close-on-context-done) ends at its time limit too, and by its caller leaving.
func TestStdioHostCallLoopStops(t *testing.T) {
	e := testEngine(t)
	ten, err := e.Tenant("t-stdio", TenantLimits{})
	if err != nil {
		t.Fatal(err)
	}
	wasm := wasmtest.Spec{
		Imports:  []wasmtest.Import{wasiFn("random_get", i32Params(2)...)},
		Funcs:    []wasmtest.Func{{Export: "_start", Body: wasmtest.Forever(call(0, 0, hugeLen), wasmtest.Drop)}},
		MemPages: hugePages,
	}.Bytes()
	m, err := e.Compile(context.Background(), "stdio-random.wasm", wasm, ABIWasiStdio)
	if err != nil {
		t.Fatal(err)
	}
	const limit = 300 * time.Millisecond
	p, err := ten.NewPool(context.Background(), m, PoolConfig{Binding: "b", Timeout: limit, OutputQueue: "out"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Close(ctx)
	})
	withinBound(t, limit+limitMargin, func() (time.Duration, error) {
		took, err := timedCall(context.Background(), p, &Input{ID: "m"})
		if !errors.Is(err, ErrTimeout) {
			return 0, fmt.Errorf("err = %v, want the time limit", err)
		}
		return took, nil
	})
}

// TestWASIIovecsInPieces: vectors that fd_read, fd_write and fd_pread hand over in pieces
// (more than iovecPiece iovecs, an iovec over pieceBytes) move the same bytes as one call
// would, leave the guest's iovec table as it was, and pread's pieces read at the offsets
// they should. A wasi-stdio command echoes its stdin through 300 one-byte iovecs and one of
// 256 KiB, then what it pread from a file of the mounted directory.
func TestWASIIovecsInPieces(t *testing.T) {
	le := func(vs ...uint32) []byte {
		var b []byte
		for _, v := range vs {
			b = binary.LittleEndian.AppendUint32(b, v)
		}
		return b
	}
	// Memory: iovec tables at 0 (300 × {64 KiB + i, 1}) and 16 KiB (300 × {3 MiB + i, 1}),
	// results from 4096, single-iovec entries from 8192, buffers at 1, 2 and 3 MiB.
	var ones, ones3 []byte
	for i := range uint32(300) {
		ones, ones3 = append(ones, le(64<<10+i, 1)...), append(ones3, le(3<<20+i, 1)...)
	}
	const (
		r1, r2, w, fd, r5, r6 = 4096, 4100, 4104, 4108, 4112, 4116
		t2, t3, t4, t5, t6    = 8192, 8200, 8208, 8216, 8224
		t8, path, t7          = 8232, 8240, 16384
	)
	data := []wasmtest.Data{
		{Offset: 0, Bytes: ones}, {Offset: t7, Bytes: ones3},
		{Offset: t2, Bytes: le(1<<20, 256<<10, 1<<20, 0, t2, 8, 2<<20, 256<<10, 2<<20, 0, 3<<20, 300)},
		{Offset: path, Bytes: []byte("f")},
	}
	i64 := wasmtest.I64Const
	start := concat(
		call(0, 0, 0, 300, r1), wasmtest.Drop, // fd_read: 300 one-byte iovecs
		call(0, 0, t2, 1, r2), wasmtest.Drop, // fd_read: the rest, into 256 KiB
		wasmtest.Copy32(t3+4, r2),
		// Written with its result pointer on the last iovec's buffer field, in the second
		// piece: the first piece's count must not land there.
		call(1, 1, 0, 300, 299*8), wasmtest.Drop,
		call(1, 1, t3, 1, w), wasmtest.Drop,
		call(1, 1, t4, 1, w), wasmtest.Drop, // the 256 KiB entry, as the guest sees it after
		wasmtest.I32s(3, 0, path, 1, 0), i64(0), i64(0), wasmtest.I32s(0, fd), wasmtest.Call(2), wasmtest.Drop,
		wasmtest.Load32(fd), wasmtest.I32s(t5, 1), i64(100), wasmtest.I32Const(r5), wasmtest.Call(3), wasmtest.Drop,
		wasmtest.Copy32(t6+4, r5),
		wasmtest.Load32(fd), wasmtest.I32s(t7, 300), i64(7), wasmtest.I32Const(r6), wasmtest.Call(3), wasmtest.Drop,
		call(1, 1, t6, 1, w), wasmtest.Drop,
		call(1, 1, t8, 1, w), wasmtest.Drop,
	)
	wasm := wasmtest.Spec{
		Imports: []wasmtest.Import{
			wasiFn("fd_read", i32Params(4)...), wasiFn("fd_write", i32Params(4)...),
			wasiFn("path_open", wasmtest.I32, wasmtest.I32, wasmtest.I32, wasmtest.I32, wasmtest.I32, wasmtest.I64, wasmtest.I64, wasmtest.I32, wasmtest.I32),
			wasiFn("fd_pread", wasmtest.I32, wasmtest.I32, wasmtest.I32, wasmtest.I64, wasmtest.I32),
		},
		Funcs:    []wasmtest.Func{{Export: "_start", Body: start}},
		MemPages: 64,
		Data:     data,
	}.Bytes()
	dir := t.TempDir()
	file := make([]byte, 300<<10)
	for i := range file {
		file[i] = byte(i * 7 / 3)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), file, 0o644); err != nil {
		t.Fatal(err)
	}
	e := testEngine(t)
	ten, err := e.Tenant("t-iovecs", TenantLimits{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := e.Compile(context.Background(), "iovecs.wasm", wasm, ABIWasiStdio)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ten.NewPool(context.Background(), m, PoolConfig{Binding: "b", Timeout: 10 * time.Second, OutputQueue: "out", ReadOnlyDir: dir, MaxOutputBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	body := make([]byte, 300+200<<10)
	for i := range body {
		body[i] = byte(i * 5 / 2)
	}
	out, err := p.Call(context.Background(), &Input{ID: "m", Body: body})
	if err != nil {
		t.Fatal(err)
	}
	want := concat(body, le(1<<20, 256<<10), file[100:100+256<<10], file[7:307])
	if out.Verdict != VerdictOK || len(out.Outputs) != 1 {
		t.Fatalf("status %v, %d outputs: %s", out.Verdict, len(out.Outputs), out.ErrorText)
	}
	if got := out.Outputs[0].Body; !bytes.Equal(got, want) {
		i := 0
		for i < min(len(got), len(want)) && got[i] == want[i] {
			i++
		}
		t.Fatalf("stdout of %d bytes differs from the %d expected from byte %d", len(got), len(want), i)
	}
}

// TestStartFunctionHostCallLoopStops: an _initialize looping on random_get of 64 MiB (which
// used to hold a host's start for good) fails the instance's start at the start time limit.
func TestStartFunctionHostCallLoopStops(t *testing.T) {
	e := testEngine(t)
	ten, err := e.Tenant("t-start", TenantLimits{})
	if err != nil {
		t.Fatal(err)
	}
	wasm := wasmtest.Spec{
		Imports: []wasmtest.Import{wasiFn("random_get", i32Params(2)...)},
		Funcs: []wasmtest.Func{
			{Export: "wqhost_abi_v1"},
			{Export: "wqhost_handle", Results: i32Result, Body: wasmtest.I32Const(0)},
			{Export: "_initialize", Body: wasmtest.Forever(call(0, 0, hugeLen), wasmtest.Drop)},
		},
		MemPages: hugePages,
	}.Bytes()
	m, err := e.Compile(context.Background(), "start-random.wasm", wasm, ABIWqhostV1)
	if err != nil {
		t.Fatal(err)
	}
	const limit = 300 * time.Millisecond
	withinBound(t, limit+limitMargin, func() (time.Duration, error) {
		done := make(chan error, 1)
		start := time.Now()
		go func() {
			p, err := ten.NewPool(context.Background(), m, PoolConfig{Binding: "b", MinInstances: 1, Timeout: limit, StartTimeout: limit})
			if err == nil {
				_ = p.Close(context.Background())
			}
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, ErrTimeout) {
				return 0, fmt.Errorf("NewPool = %v, want the start function's time limit", err)
			}
			return time.Since(start), nil
		case <-time.After(time.Minute): // far above the bound: only a start that never ends gets here
			return 0, errors.New("the start function did not stop within a minute")
		}
	})
}
