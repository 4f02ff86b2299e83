package fuel

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wqhost/wqhost/runtime/internal/wasmbin"
)

// TestFuelStartSection: a start section that never returns (hand-assembled: Go, TinyGo and
// Rust use _initialize, which TestStartFunctionNeverReturns covers) calls yield like any
// other code, so the host can end it.
func TestFuelStartSection(t *testing.T) {
	wasm := []byte("\x00asm\x01\x00\x00\x00" +
		"\x01\x04\x01\x60\x00\x00" + // type () -> ()
		"\x03\x02\x01\x00" + // func 0: type 0
		"\x08\x01\x00" + // start 0
		"\x0a\x09\x01\x07\x00\x03\x40\x0c\x00\x0b\x0b") // loop br 0 end
	yc, err := Instrument(wasm)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	var yields int
	stop := errors.New("stopped by the test's yield")
	_, err = rt.NewHostModuleBuilder(YieldModule).NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, _ api.Module, s []uint64) {
			if yields++; yields == 3 {
				panic(stop)
			}
			s[0] = Refill
		}), nil, []api.ValueType{api.ValueTypeI32}).Export(YieldImport).Instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = rt.Instantiate(ctx, yc)
	if !errors.Is(err, stop) {
		t.Fatalf("instantiate: %v, want the start function ended by yield", err)
	}
}

// TestInstrumentRenumbers: a module with imports, a table of functions, ref.func, an
// exported function and a start function still calls what it called before: the yield
// import shifts every defined function's index by one.
func TestInstrumentRenumbers(t *testing.T) {
	// func 0: import env.f, returns 7; 1 $a: 1; 2 $b: f() + table[0]() = 8; 3 $c: $b(),
	// exported as run; 4 $s: the start function, drops $a(). The table holds $a and $b, a
	// global holds ref.func $a.
	mod := []byte("\x00asm\x01\x00\x00\x00")
	sec := func(id byte, body ...byte) {
		mod = append(mod, id, byte(len(body)))
		mod = append(mod, body...)
	}
	sec(1, 2, 0x60, 0, 1, 0x7f, 0x60, 0, 0)      // types: 0 () -> i32, 1 () -> ()
	sec(2, 1, 3, 'e', 'n', 'v', 1, 'f', 0x00, 0) // import env.f: type 0
	sec(3, 4, 0, 0, 0, 1)                        // funcs 1..4: a b c (type 0), s (type 1)
	sec(4, 1, 0x70, 0x00, 2)                     // table 2 funcref
	sec(6, 1, 0x70, 0x00, 0xd2, 1, 0x0b)         // global funcref = ref.func 1
	sec(7, 1, 3, 'r', 'u', 'n', 0x00, 3)         // export "run" = func 3
	sec(8, 4)                                    // start func 4
	sec(9, 1, 0x00, 0x41, 0, 0x0b, 2, 1, 2)      // elem at 0: funcs 1, 2
	sec(10, 4,
		4, 0, 0x41, 1, 0x0b, // a: 1
		10, 0, 0x10, 0, 0x41, 0, 0x11, 0, 0x00, 0x6a, 0x0b, // b: f() + table[0]()
		4, 0, 0x10, 2, 0x0b, // c: b()
		5, 0, 0x10, 1, 0x1a, 0x0b) // s: drop a()
	ctx := context.Background()
	for _, instrumented := range []bool{false, true} {
		rt := wazero.NewRuntime(ctx)
		var yields int
		_, err := rt.NewHostModuleBuilder("env").NewFunctionBuilder().
			WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, _ api.Module, s []uint64) { s[0] = 7 }), nil, []api.ValueType{api.ValueTypeI32}).Export("f").
			Instantiate(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, err = rt.NewHostModuleBuilder(YieldModule).NewFunctionBuilder().
			WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, _ api.Module, s []uint64) { yields++; s[0] = Refill }), nil, []api.ValueType{api.ValueTypeI32}).Export(YieldImport).
			Instantiate(ctx)
		if err != nil {
			t.Fatal(err)
		}
		wasm := mod
		if instrumented {
			yc, err := Instrument(mod)
			if err != nil {
				t.Fatal(err)
			}
			wasm = yc
		}
		m, err := rt.Instantiate(ctx, wasm)
		if err != nil {
			t.Fatalf("instrumented=%v: %v", instrumented, err)
		}
		res, err := m.ExportedFunction("run").Call(ctx)
		if err != nil || res[0] != 8 {
			t.Errorf("instrumented=%v: run() = %v, %v; want 8", instrumented, res, err)
		}
		_ = rt.Close(ctx)
	}
}

// committedModules are every .wasm the project commits.
func committedModules(t testing.TB) []string {
	var files []string
	for _, pat := range []string{"../../../examples/handlers/*/*.wasm", "../../testdata/*/*.wasm", "../../../host/testdata/*/*.wasm"} {
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

// TestInstrumentCommittedModules: every committed module instruments, the result validates in
// wazero, and removing the inserted checks and numbering the calls back gives the original
// code section (with function indices minimally encoded), so the only change in behaviour
// is the checks themselves; the modules' own tests then run them instrumented.
func TestInstrumentCommittedModules(t *testing.T) {
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter()) // validation is what counts here, and it is cheaper
	defer rt.Close(ctx)
	for _, path := range committedModules(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			wasm, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			yc, err := Instrument(wasm)
			if err != nil {
				t.Fatal(err)
			}
			cm, err := rt.CompileModule(ctx, yc)
			if err != nil {
				t.Fatalf("instrumented module does not compile: %v", err)
			}
			_ = cm.Close(ctx)
			// Unrolled loops aside (the spec suite and TestUnrolledLoops cover them), the code
			// is the original's with the checks added.
			yc, err = InstrumentWith(wasm, Options{Segment: SegmentBytes, Fuel: Refill, Unroll: 1})
			if err != nil {
				t.Fatal(err)
			}
			x, params := fuelIndexOf(t, wasm)
			orig, got := sectionOf(t, wasm, wasmbin.SecCode), sectionOf(t, yc, wasmbin.SecCode)
			stripped, checks := stripChecks(t, got, x, params)
			// Toolchains may write call indices as padded LEB128 (relocatable encodings);
			// the instrumenter writes them minimal.
			orig, _ = stripChecks(t, orig, nil, params)
			if !bytes.Equal(stripped, orig) {
				t.Fatal("instrumented code section minus the checks differs from the original")
			}
			if checks == 0 {
				t.Fatal("no checks inserted")
			}
		})
	}
}

// FuzzInstrument: on any input the instrumenter does not panic, and whenever wazero
// accepts a module the instrumenter either refuses it (the fallback) or returns a module
// wazero accepts too, with the usual checks or with one between every two instructions.
// Besides the committed modules the seeds are spec-suite modules that import memories,
// tables and globals (which instrumentation version 2 wrote an invalid import count for)
// when the module cache holds them.
func FuzzInstrument(f *testing.F) {
	for _, p := range []string{"../../testdata/spin/spin-tinygo.wasm", "../../testdata/spinrust/spinrust.wasm", "../../../examples/handlers/echo-rust/echo-rust.wasm"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("\x00asm\x01\x00\x00\x00"))
	for _, wasm := range hugeCounts {
		f.Add(wasm)
	}
	if dir := specDir(); dir != "" {
		for _, name := range []string{"imports.0", "imports.1", "linking.0", "linking.5", "memory_grow.0", "br_table.0", "loop.0", "if.0", "block.0", "br_if.0"} {
			if b, err := os.ReadFile(filepath.Join(dir, "v2", "testdata", name+".wasm")); err == nil {
				f.Add(b)
			}
		}
	}
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	f.Fuzz(func(t *testing.T, wasm []byte) {
		yc, err := Instrument(wasm)
		if err != nil {
			if !errors.Is(err, ErrUndecodable) {
				t.Fatalf("error not marked undecodable: %v", err)
			}
			return
		}
		dense, err := denseInstrument(wasm)
		if err != nil {
			t.Fatalf("instrumented with the usual checks but not with dense ones: %v", err)
		}
		if !plausibleCounts(wasm) {
			return
		}
		cm, err := rt.CompileModule(ctx, withoutCustomSections(wasm))
		if err != nil {
			return
		}
		_ = cm.Close(ctx)
		for _, out := range [][]byte{yc, dense} {
			cm, err = rt.CompileModule(ctx, withoutCustomSections(out))
			if err != nil {
				t.Fatalf("original compiles, instrumented does not: %v", err)
			}
			_ = cm.Close(ctx)
		}
	})
}

// hugeCounts are modules whose vectors claim 2^32-1 entries and hold none: the renumbering
// wrote a few bytes per claimed entry and ran out of memory.
var hugeCounts = func() (mods [][]byte) {
	for _, sec := range []string{
		"\x07\x05\xff\xff\xff\xff\x0f",                     // exports
		"\x09\x09\x01\x00\x41\x00\x0b\xff\xff\xff\xff\x0f", // an element segment's functions
		"\x00\x0c\x04name\x01\x05\xff\xff\xff\xff\x0f",     // function names
		"\x01\x08\x01\x60\xff\xff\xff\xff\x0f\x00",         // a type's parameters
	} {
		mods = append(mods, []byte("\x00asm\x01\x00\x00\x00"+sec))
	}
	return mods
}()

// TestInstrumentHugeCounts: see hugeCounts; each is refused, or instrumented without its
// name section, in a few bytes.
func TestInstrumentHugeCounts(t *testing.T) {
	for i, wasm := range hugeCounts {
		yc, err := Instrument(wasm)
		if err == nil && len(yc) > 2*len(wasm)+64 {
			t.Errorf("module %d: %d bytes instrumented from %d", i, len(yc), len(wasm))
		}
	}
}

// withoutCustomSections drops wasm's custom sections, which do not change whether it is
// valid: wazero 1.12's decoder runs out of memory (a fatal error, not a panic) on a name
// section claiming 2^32-1 names, and the fuzzer finds that quickly.
func withoutCustomSections(wasm []byte) []byte {
	if len(wasm) < 8 {
		return wasm
	}
	out := append([]byte(nil), wasm[:8]...)
	r := &wasmbin.Reader{Buf: wasm, Pos: 8}
	for r.Pos < len(r.Buf) {
		at := r.Pos
		id := r.Byte()
		r.Bytes(int(r.U32()))
		if r.Err != nil {
			return append(out, wasm[at:]...) // let wazero say what is wrong
		}
		if id != wasmbin.SecCustom {
			out = append(out, wasm[at:r.Pos]...)
		}
	}
	return out
}

// plausibleCounts reports whether every section that is a vector claims no more entries
// than it has bytes: wazero 1.12's decoder allocates a section's entries before reading
// them, and runs out of memory (a fatal error) on a few bytes claiming 2^32-1 of them.
func plausibleCounts(wasm []byte) bool {
	r := &wasmbin.Reader{Buf: wasm, Pos: min(8, len(wasm))}
	for r.Pos < len(r.Buf) {
		id := r.Byte()
		p := r.Bytes(int(r.U32()))
		if r.Err != nil {
			return true // malformed: wazero stops before allocating
		}
		if id != wasmbin.SecCustom && id != wasmbin.SecStart {
			if n := (&wasmbin.Reader{Buf: p}).U32(); int64(n) > int64(len(p)) {
				return false
			}
		}
	}
	return true
}

func TestChargeFor(t *testing.T) {
	for _, tt := range []struct {
		cost uint64
		want uint32
	}{
		{0, 1},
		{31, 1},
		{64, 3},
		{SegmentBytes, 1 + SegmentBytes/ChargeBytes},
		{10 + bulkBytes, 1 + BulkCharge},
		{1 << 40, Refill}, // a whole allowance or more: yields every time, never wraps the i32 fuel
	} {
		if got := chargeFor(tt.cost); got != tt.want {
			t.Errorf("chargeFor(%d) = %d, want %d", tt.cost, got, tt.want)
		}
	}
}
