package runtime

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// TestTimeLimitStopsEveryLanguage: an endless loop and an endless recursion in a guest built
// by each supported toolchain end at the pool's default-style time limit through the stop
// flag (not the close-on-context-done fallback), and the pool serves the next message.
func TestTimeLimitStopsEveryLanguage(t *testing.T) {
	e := testEngine(t)
	for _, lang := range []struct{ name, path string }{
		{"go", "testdata/spin/spin-go.wasm"},
		{"tinygo", "testdata/spin/spin-tinygo.wasm"},
		{"rust", "testdata/spinrust/spinrust.wasm"},
	} {
		t.Run(lang.name, func(t *testing.T) {
			ten, err := e.Tenant("t-"+lang.name, TenantLimits{MemoryPages: 256})
			if err != nil {
				t.Fatal(err)
			}
			m := load(t, e, lang.path, ABIWqhostV1)
			if m.c.stop == nil {
				t.Fatalf("%s was not instrumented with a stop flag", lang.path)
			}
			p, err := ten.NewPool(context.Background(), m, PoolConfig{Binding: "b", MinInstances: 1, MaxInstances: 1, Timeout: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Close(context.Background()) })
			if !p.v.stop || p.v.terminate {
				t.Fatalf("pool variant = %+v, want the stop flag without close-on-context-done", p.v)
			}
			for _, body := range []string{"loop", "recurse"} {
				done := make(chan error, 1)
				go func() {
					_, err := p.Call(context.Background(), &Input{ID: body, Body: []byte(body)})
					done <- err
				}()
				select {
				case err := <-done:
					if body == "loop" && !errors.Is(err, ErrTimeout) {
						t.Fatalf("%s: err = %v, want the time limit", body, err)
					}
					if err == nil {
						t.Fatalf("%s: call returned no error", body)
					}
				case <-time.After(time.Minute): // far above the limit: only a guest never stopped gets here
					t.Fatalf("%s: the time limit did not stop the guest", body)
				}
				if _, err := p.Call(context.Background(), &Input{ID: "ok", Body: []byte("x")}); err != nil {
					t.Fatalf("call after %s: %v", body, err)
				}
			}
		})
	}
}

// TestStopFlagStartSection: a start section that never returns (hand-assembled: Go, TinyGo
// and Rust use _initialize, which TestStartFunctionNeverReturns covers) is moved to an export
// the pool runs with the flag reachable, and setting the flag stops it.
func TestStopFlagStartSection(t *testing.T) {
	wasm := []byte("\x00asm\x01\x00\x00\x00" +
		"\x01\x04\x01\x60\x00\x00" + // type () -> ()
		"\x03\x02\x01\x00" + // func 0: type 0
		"\x08\x01\x00" + // start 0
		"\x0a\x09\x01\x07\x00\x03\x40\x0c\x00\x0b\x0b") // loop br 0 end
	sc, err := instrumentStop(wasm)
	if err != nil {
		t.Fatal(err)
	}
	if !sc.start {
		t.Fatal("start section not moved to an export")
	}
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	mod, err := rt.InstantiateWithConfig(ctx, sc.wasm, wazero.NewModuleConfig().WithStartFunctions())
	if err != nil {
		t.Fatalf("instantiating the instrumented module ran or failed its start: %v", err)
	}
	g, ok := mod.ExportedGlobal(stopExport).(api.MutableGlobal)
	if !ok {
		t.Fatal("no mutable stop flag exported")
	}
	stopped := make(chan struct{})
	timer := time.AfterFunc(50*time.Millisecond, func() { g.Set(1); close(stopped) })
	defer timer.Stop()
	done := make(chan error, 1)
	go func() {
		_, err := mod.ExportedFunction(startExport).Call(ctx)
		done <- err
	}()
	select {
	case err := <-done:
		<-stopped
		if err == nil {
			t.Fatal("start returned without error after the flag was set")
		}
	case <-time.After(time.Minute):
		t.Fatal("setting the stop flag did not stop the start function")
	}
}

// committedModules are every .wasm the project commits.
func committedModules(t testing.TB) []string {
	var files []string
	for _, pat := range []string{"../examples/handlers/*/*.wasm", "testdata/*/*.wasm", "../host/testdata/*/*.wasm"} {
		m, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 20 {
		t.Fatalf("found only %d committed .wasm files", len(files))
	}
	return files
}

// TestInstrumentCommittedModules: every committed module instruments, the result compiles in
// wazero (so it validates), and removing the inserted checks gives back the original code
// section byte for byte, so the only change in behaviour is the checks themselves; the
// modules' own tests then run them instrumented.
func TestInstrumentCommittedModules(t *testing.T) {
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	for _, path := range committedModules(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			wasm, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			sc, err := instrumentStop(wasm)
			if err != nil {
				t.Fatal(err)
			}
			cm, err := rt.CompileModule(ctx, sc.wasm)
			if err != nil {
				t.Fatalf("instrumented module does not compile: %v", err)
			}
			_ = cm.Close(ctx)
			orig, got := sectionOf(t, wasm, secCode), sectionOf(t, sc.wasm, secCode)
			stripped, checks := stripStopChecks(t, got)
			if !bytes.Equal(stripped, orig) {
				t.Fatal("instrumented code section minus the checks differs from the original")
			}
			if checks == 0 {
				t.Fatal("no checks inserted")
			}
		})
	}
}

func sectionOf(t testing.TB, wasm []byte, id byte) []byte {
	r := &reader{b: wasm, i: 8}
	for r.i < len(r.b) {
		sid := r.byte()
		p := r.bytes(int(r.u32()))
		if r.err != nil {
			t.Fatal(r.err)
		}
		if sid == id {
			return p
		}
	}
	t.Fatalf("no section %d", id)
	return nil
}

// stripStopChecks removes the check after each function's locals and each loop's block type,
// failing if one is missing.
func stripStopChecks(t testing.TB, code []byte) ([]byte, int) {
	r := &reader{b: code}
	n := r.u32()
	out := appendU32(nil, n)
	checks := 0
	var idx uint32
	for f := range n {
		src := r.bytes(int(r.u32()))
		br := &reader{b: src}
		for range br.u32() {
			br.u32()
			br.byte()
		}
		var body []byte
		body = append(body, src[:br.i]...)
		skipCheck := func() {
			at := br.i
			if br.byte() != 0x23 {
				t.Fatalf("function %d: no check at offset %d", f, at)
			}
			i := br.u32()
			if checks == 0 {
				idx = i
			}
			if i != idx || !bytes.Equal(br.bytes(4), []byte{0x04, 0x40, 0x00, 0x0b}) {
				t.Fatalf("function %d: malformed check at offset %d", f, at)
			}
			checks++
		}
		skipCheck()
		for depth := 1; depth > 0; {
			at := br.i
			op := br.byte()
			loop, err := skipImmediates(br, op)
			if err != nil {
				t.Fatalf("function %d: %v", f, err)
			}
			body = append(body, src[at:br.i]...)
			switch op {
			case 0x02, 0x03, 0x04:
				depth++
			case 0x0b:
				depth--
			}
			if loop {
				skipCheck()
			}
		}
		out = appendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	return out, checks
}

// FuzzInstrumentStop: on any input the instrumenter does not panic, and whenever wazero
// accepts a module the instrumenter either refuses it (the fallback) or returns a module
// wazero accepts too.
func FuzzInstrumentStop(f *testing.F) {
	for _, p := range []string{"testdata/spin/spin-tinygo.wasm", "testdata/spinrust/spinrust.wasm", "../examples/handlers/echo-rust/echo-rust.wasm"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("\x00asm\x01\x00\x00\x00"))
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	f.Fuzz(func(t *testing.T, wasm []byte) {
		sc, err := instrumentStop(wasm)
		if err != nil {
			if !errors.Is(err, errUndecodable) {
				t.Fatalf("error not marked undecodable: %v", err)
			}
			return
		}
		cm, err := rt.CompileModule(ctx, wasm)
		if err != nil {
			return
		}
		_ = cm.Close(ctx)
		cm, err = rt.CompileModule(ctx, sc.wasm)
		if err != nil {
			t.Fatalf("original compiles, instrumented does not: %v", err)
		}
		_ = cm.Close(ctx)
	})
}
