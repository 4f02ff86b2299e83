package runtime

import (
	"context"
	"errors"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/wqhost/wqhost/internal/wasmtest"

	"github.com/wqhost/wqhost/runtime/internal/wasmbin"
)

// TestRealModulesFitDefaultCompileLimits: every module this project builds (standard Go,
// TinyGo and Rust handlers and test guests) fits the default compile limits with at least a
// threefold margin on each, so the caps refuse only what no compiler emits.
func TestRealModulesFitDefaultCompileLimits(t *testing.T) {
	var paths []string
	err := filepath.WalkDir("..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "tools" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && p != ".." {
			return filepath.SkipDir
		}
		if strings.HasSuffix(p, ".wasm") {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 20 {
		t.Fatalf("found %d .wasm files under the repository; want the examples' and testdata's", len(paths))
	}
	l := CompileLimits{}.withDefaults()
	var most moduleShape
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		s, err := checkShape(b, l)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		most.functions = max(most.functions, s.functions)
		most.maxBodyBytes = max(most.maxBodyBytes, s.maxBodyBytes)
		most.maxDepth = max(most.maxDepth, s.maxDepth)
		most.maxLoops = max(most.maxLoops, s.maxLoops)
		most.maxBranches = max(most.maxBranches, s.maxBranches)
		most.maxLocals = max(most.maxLocals, s.maxLocals)
		most.typeValues = max(most.typeValues, s.typeValues)
		most.globals = max(most.globals, s.globals)
	}
	t.Logf("largest of %d modules: functions %d, body %d bytes, nesting %d, loops %d, branches %d, locals %d, type values %d, globals %d",
		len(paths), most.functions, most.maxBodyBytes, most.maxDepth, most.maxLoops, most.maxBranches, most.maxLocals, most.typeValues, most.globals)
	for _, c := range []struct {
		name     string
		got, lim uint64
	}{
		{"max_functions", uint64(most.functions), uint64(l.MaxFunctions)},
		{"max_function_bytes", uint64(most.maxBodyBytes), uint64(l.MaxFunctionBytes)},
		{"max_nesting_depth", uint64(most.maxDepth), uint64(l.MaxNestingDepth)},
		{"max_loop_depth", uint64(most.maxLoops), uint64(l.MaxLoopDepth)},
		{"max_branches", uint64(most.maxBranches), uint64(l.MaxBranches)},
		{"max_locals", most.maxLocals, uint64(l.MaxLocals)},
		{"max_type_values", most.typeValues, uint64(l.MaxTypeValues)},
		{"max_globals", most.globals, uint64(l.MaxGlobals)},
	} {
		if c.got == 0 || 3*c.got > c.lim {
			t.Errorf("%s: largest real module has %d, the default %d leaves less than a threefold margin", c.name, c.got, c.lim)
		}
	}
}

// TestCompileBombsRefused: modules whose compilation would take seconds to minutes or
// gigabytes (shape.go) are refused by Engine.Compile with a *CapError naming the cap, its
// value and the function, after one pass over their bytes: a few MiB allocated at most.
func TestCompileBombsRefused(t *testing.T) {
	ctx := context.Background()
	e := testEngine(t)
	mod := func(body []byte) []byte { return wasmtest.Module(wasmtest.Handle(body)) }
	brTable := func(targets int) []byte {
		body := []byte{0x02, 0x40, 0x41, 0x00, 0x0e}
		body = wasmbin.AppendU32(body, uint32(targets))
		body = append(body, make([]byte, targets+1)...)
		return mod(append(body, 0x0b, 0x41, 0x00))
	}
	brIfs := func(n int) []byte {
		body := []byte{0x02, 0x40}
		for range n {
			body = append(body, 0x41, 0x00, 0x0d, 0x00)
		}
		return mod(append(body, 0x0b, 0x41, 0x00))
	}
	for _, tc := range []struct {
		name string
		wasm []byte
		cap  string
		fn   int
		want string
	}{
		{"10k nested loops", mod(wasmtest.NestedLoops(10_000)), "max_loop_depth", 0, "compile limit: 501 in function 0, above max_loop_depth 500"},
		{"20k nested blocks", mod(wasmtest.Nested(20_000, 0)), "max_nesting_depth", 0, "compile limit: 10001 in function 0, above max_nesting_depth 10000"},
		{"6 MB function", mod(wasmtest.StraightLine(6 << 20)), "max_function_bytes", 0, "above max_function_bytes 1048576"},
		{"4 billion locals", wasmtest.WithLocals(mod(wasmtest.I32Const(0)), 4_000_000_000), "max_locals", 0, "compile limit: 4000000000 in function 0, above max_locals 2000"},
		{"200k functions", wasmtest.ManyFunctions(200_000), "max_functions", -1, "compile limit: 200001, above max_functions 100000"},
		{"25k br_if", brIfs(25_000), "max_branches", 0, "compile limit: 10001 in function 0, above max_branches 10000"},
		{"br_table of 1M targets", brTable(1_000_000), "max_branches", 0, "compile limit: 1000001 in function 0, above max_branches 10000"},
		{"8,000 types of 1,000 parameters", wasmtest.TypeBomb(8_000, 1_000), "max_type_values", -1, "compile limit: 50001, above max_type_values 50000"},
		{"1,000,000 globals", wasmtest.Globals(1_000_000), "max_globals", -1, "compile limit: 1000000, above max_globals 10000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before, after goruntime.MemStats
			goruntime.ReadMemStats(&before)
			_, err := e.Compile(ctx, "bomb.wasm", tc.wasm, ABIWqhostV1)
			goruntime.ReadMemStats(&after)
			var ce *CapError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCompileLimit) {
				t.Fatalf("err = %v; want a *CapError", err)
			}
			if ce.Cap != tc.cap || ce.Function != tc.fn || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "runtime: bomb.wasm: ") {
				t.Errorf("err = %q (cap %s, function %d); want cap %s, function %d, text %q", err, ce.Cap, ce.Function, tc.cap, tc.fn, tc.want)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
				t.Errorf("refusing it allocated %d bytes; want at most 4 MiB (the bytes are read, not decoded)", alloc)
			}
		})
	}
}

// TestCompileLimitsPerCall: CompileWithLimits applies the caps given (a tenant's), not the
// engine's, and a module refused under tight caps compiles under the defaults; Validate
// applies the defaults.
func TestCompileLimitsPerCall(t *testing.T) {
	ctx := context.Background()
	e := testEngine(t)
	wasm := handleModule(nil, wasmtest.Nested(40, 0))
	_, err := e.CompileWithLimits(ctx, "deep.wasm", wasm, ABIWqhostV1, CompileLimits{MaxNestingDepth: 20})
	var ce *CapError
	if !errors.As(err, &ce) || ce.Cap != "max_nesting_depth" || ce.Limit != 20 || ce.Function != 1 {
		t.Fatalf("tight caps: err = %v; want max_nesting_depth 20 in function 1", err)
	}
	if _, err := e.Compile(ctx, "deep.wasm", wasm, ABIWqhostV1); err != nil {
		t.Fatalf("default caps: %v", err)
	}
	// Validate (a file, the default caps) checks them too.
	path := filepath.Join(t.TempDir(), "loops.wasm")
	if err := os.WriteFile(path, handleModule(nil, wasmtest.NestedLoops(10_000)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Validate(ctx, path, ABIWqhostV1); !errors.As(err, &ce) || ce.Cap != "max_loop_depth" {
		t.Fatalf("Validate: err = %v; want max_loop_depth", err)
	}
}

// TestShapeRefusesUnreadableCode: bytes the pre-scan cannot read are "not a valid wasm
// module", with where, before wazero sees them.
func TestShapeRefusesUnreadableCode(t *testing.T) {
	e := testEngine(t)
	good := handleModule(nil, wasmtest.I32Const(0))
	for _, tc := range []struct {
		name string
		wasm []byte
		want string
	}{
		{"not wasm", []byte("hello, world"), "invalid magic number"},
		{"truncated", good[:len(good)-3], "section 10: unexpected end"},
		{"unknown opcode", handleModule(nil, []byte{0xff}, wasmtest.I32Const(0)), "function 1: opcode 0xff"},
		// 13 to 20 bytes each, stating counts or lengths wazero 1.12's decoder allocates
		// for before reading: each ended the process with a fatal out of memory.
		{"4G imports", oneSection(2, 0xff, 0xff, 0xff, 0xff, 0x0f), "section 2: unexpected end"},
		{"4G types", oneSection(1, 0xff, 0xff, 0xff, 0xff, 0x0f), "section 1: unexpected end"},
		{"4G functions", oneSection(3, 0xff, 0xff, 0xff, 0xff, 0x0f), "section 3: functions: count 4294967295 past the end of its section"},
		{"4G data segments", oneSection(11, 0xff, 0xff, 0xff, 0xff, 0x0f), "section 11: data segments: count 4294967295 past the end"},
		{"4 GiB data segment", oneSection(11, 0x01, 0x01, 0xff, 0xff, 0xff, 0xff, 0x0f), "section 11: data segment 0: length 4294967295 past the end"},
		{"4G element entries", oneSection(9, 0x01, 0x01, 0x00, 0xff, 0xff, 0xff, 0xff, 0x0f), "section 9: element segment 0: count 4294967295 past the end"},
		{"4 GiB export name", oneSection(7, 0x01, 0xff, 0xff, 0xff, 0xff, 0x0f), "section 7: export name: length 4294967295 past the end"},
		{"4 GiB custom section name", oneSection(0, 0xff, 0xff, 0xff, 0xff, 0x0f), "section 0: custom section name: length 4294967295 past the end"},
	} {
		_, err := e.Compile(context.Background(), "x.wasm", tc.wasm, ABIWqhostV1)
		if err == nil || !strings.Contains(err.Error(), "runtime: x.wasm: not a valid wasm module") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v; want not a valid wasm module ... %q", tc.name, err, tc.want)
		}
	}
}

// oneSection returns a module of the header and one section of payload.
func oneSection(id byte, payload ...byte) []byte {
	b := append([]byte("\x00asm\x01\x00\x00\x00"), id)
	return append(wasmbin.AppendU32(b, uint32(len(payload))), payload...)
}

// TestShapeAcceptsTheSpecSuite: the pre-scan refuses no module of the WebAssembly spec test
// suite (wazero's copy, core 1.0 and 2.0) that wazero accepts, but the one whose function has
// a br_table of 16,150 targets, above max_branches, and the six whose code grows a table
// declared without a maximum (table_grow.0-2, 4, 5 and table_size.0), refused by
// max_table_elements: such a table can grow to 4 billion elements outside the memory limit.
var growsUnboundedTable = []string{"table_grow.0.wasm", "table_grow.1.wasm", "table_grow.2.wasm",
	"table_grow.4.wasm", "table_grow.5.wasm", "table_size.0.wasm"}

func TestShapeAcceptsTheSpecSuite(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/tetratelabs/wazero").Output()
	if err != nil {
		t.Skipf("locating wazero's source (go list -m): %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "internal", "integration_test", "spectest")
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	n := 0
	for _, v := range []string{"v1", "v2"} {
		files, _ := filepath.Glob(filepath.Join(dir, v, "testdata", "*.wasm"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			n++
			_, serr := checkShape(b, CompileLimits{})
			if serr == nil {
				continue
			}
			cm, werr := compileModule(ctx, rt, b)
			if werr != nil {
				continue
			}
			_ = cm.Close(ctx)
			var ce *CapError
			if filepath.Base(f) == "br_table.0.wasm" && errors.As(serr, &ce) && ce.Cap == "max_branches" {
				continue
			}
			if v == "v2" && slices.Contains(growsUnboundedTable, filepath.Base(f)) &&
				errors.As(serr, &ce) && ce.Cap == "max_table_elements" && ce.Got == math.MaxUint32 {
				continue
			}
			t.Errorf("%s/%s: wazero accepts it, the pre-scan refuses it: %v", v, filepath.Base(f), serr)
		}
	}
	if n < 5000 {
		t.Fatalf("read %d spec modules under %s; want the suite's 7,000", n, dir)
	}
}
