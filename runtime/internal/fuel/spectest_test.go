package fuel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// The official WebAssembly spec test suite run through the fuel instrumenter: every module
// of wazero's copy of the suite (wast2json output in the Go module cache, read where `go
// mod download` put it, never copied into this repository) is instantiated three times: as
// it is, instrumented (starting without fuel, so every check calls yield), and instrumented
// with a check between every two instructions; every command runs in all three, and any difference in results, traps or instantiation is a
// defect of the instrumenter. Invalid and malformed modules must be refused the same way. The
// original's results are also checked against the suite's expectations, so a harness that
// ran nothing right could not pass.

// specSuites are the suites run, with the features they need. The instrumenter must take
// every module of the first four. Exception handling and typed function references are
// beyond it (and beyond wqhost's runtimes, which do not enable them, so no module using
// them gets past validation): a module of those suites it refuses runs uninstrumented, as
// the host would run it, and is counted and named.
var specSuites = []struct {
	dir      string
	features api.CoreFeatures
	beyond   bool
}{
	{"v2", api.CoreFeaturesV2, false},
	{"tail-call", api.CoreFeaturesV2 | experimental.CoreFeaturesTailCall, false},
	{"extended-const", api.CoreFeaturesV2 | experimental.CoreFeaturesExtendedConst, false},
	{"threads", api.CoreFeaturesV2 | experimental.CoreFeaturesThreads, false},
	{"exception-handling", api.CoreFeaturesV2 | experimental.CoreFeaturesExceptionHandling |
		experimental.CoreFeaturesTailCall | experimental.CoreFeaturesTypedFunctionReferences, true},
	{"typed-function-references", api.CoreFeaturesV2 | experimental.CoreFeaturesTypedFunctionReferences |
		experimental.CoreFeaturesTailCall, true},
}

type specScript struct {
	Commands []specCommand `json:"commands"`
}

type specCommand struct {
	Type       string      `json:"type"`
	Line       int         `json:"line"`
	Name       string      `json:"name"`
	Filename   string      `json:"filename"`
	As         string      `json:"as"`
	ModuleType string      `json:"module_type"`
	Action     specAction  `json:"action"`
	Expected   []specValue `json:"expected"`
}

type specAction struct {
	Type   string      `json:"type"`
	Module string      `json:"module"`
	Field  string      `json:"field"`
	Args   []specValue `json:"args"`
}

type specValue struct {
	Type     string `json:"type"`
	LaneType string `json:"lane_type"`
	Value    any    `json:"value"`
}

// specDir is wazero's spec test directory in the module cache, or "" if it is not there.
func specDir() string {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/tetratelabs/wazero").Output()
	if err != nil {
		return ""
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "internal", "integration_test", "spectest")
	if _, err := os.Stat(filepath.Join(dir, "v2", "testdata")); err != nil {
		return ""
	}
	return dir
}

// specStats are the suite's totals.
type specStats struct {
	modules, assertions, differences, specMismatches, yields int
	refused                                                  []string // valid modules the instrumenter would not take
	refusedBeyond                                            []string // the same, in the suites beyond WebAssembly 2.0
	invalidMadeValid                                         []string // invalid modules the rewriter alone would turn valid
	diffs                                                    []string
}

func (s *specStats) differ(where, format string, args ...any) {
	s.differences++
	if len(s.diffs) < 40 {
		s.diffs = append(s.diffs, where+": "+fmt.Sprintf(format, args...))
	}
}

// raceShare: with the race detector, which slows the interpreter about tenfold and has
// nothing to find in this one goroutine, TestSpecSuite runs one script in raceShare, and
// none of raceSkips, the slowest (a million tail calls, deep recursion, big memories: 6 s
// of the suite's 10 without the detector).
const raceShare = 4

var raceSkips = map[string]bool{
	"return_call.json": true, "return_call_indirect.json": true, "skip-stack-guard-page.json": true,
	"memory_grow.json": true, "memory_copy.json": true, "memory_fill.json": true,
}

// TestSpecSuite: see above. It prints `spec suite: modules=N assertions=M differences=0`.
func TestSpecSuite(t *testing.T) {
	dir := specDir()
	if dir == "" {
		t.Skip("wazero's spec tests are not in the Go module cache (go mod download github.com/tetratelabs/wazero)")
	}
	spectest, err := os.ReadFile(filepath.Join(dir, "testdata", "spectest.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	var st specStats
	for _, suite := range specSuites {
		files, err := filepath.Glob(filepath.Join(dir, suite.dir, "testdata", "*.json"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no spec scripts in %s: %v", suite.dir, err)
		}
		for i, f := range files {
			if raceDetector && (i%raceShare != 0 || raceSkips[filepath.Base(f)]) {
				continue
			}
			runSpecScript(t, &st, suite.dir+"/"+filepath.Base(f), f, spectest, suite.features, suite.beyond)
		}
	}
	for _, d := range st.diffs {
		t.Error(d)
	}
	fmt.Printf("spec suite: modules=%d assertions=%d differences=%d\n", st.modules, st.assertions, st.differences)
	fmt.Printf("spec suite: %d modules of the exception-handling and typed-function-references suites run uninstrumented: %s\n",
		len(st.refusedBeyond), strings.Join(st.refusedBeyond, ", "))
	if len(st.refused) > 0 {
		t.Errorf("valid modules the instrumenter refused: %s", strings.Join(st.refused, ", "))
	}
	if st.specMismatches > 0 {
		t.Errorf("%d results of the original modules differ from the suite's expectations: the harness is wrong", st.specMismatches)
	}
	minModules := 1000
	if raceDetector {
		minModules /= raceShare
	}
	// Every assertion runs through checks that yield in the starved world (every entry
	// tests there), but a small loop unrolled (instrument_emit.go) tests once per four
	// passes: half an assertion's worth of yields is what a harness that ran its
	// instrumented modules cannot miss.
	if st.modules < minModules || st.yields < st.assertions/2 {
		t.Errorf("ran only %d modules, %d assertions, %d checks", st.modules, st.assertions, st.yields)
	}
	if len(st.invalidMadeValid) > 0 {
		t.Errorf("invalid modules the rewriter alone (without the validation before it) turns valid: %s", strings.Join(st.invalidMadeValid, ", "))
	}
}

// specWorld is one side of the comparison: a runtime with the spectest and wqhost host
// modules, and the modules instantiated so far.
type specWorld struct {
	rt    wazero.Runtime
	named map[string]api.Module
	last  api.Module
	instr func([]byte) ([]byte, error) // nil: the original
	// refused is why the last module instantiated runs uninstrumented, if it does.
	refused error
}

// denseInstrument puts a check between every two instructions, so that the suite checks a
// check's effect wherever one can go, not only where a few KiB of code have passed.
func denseInstrument(wasm []byte) ([]byte, error) {
	return InstrumentWith(wasm, Options{Segment: 0, Fuel: Refill, Unroll: UnrollCopies})
}

// starvedInstrument has the usual checks, every entry tested, and starts without fuel: with
// a yield that hands out none either, every check takes its slow path, the call to yield.
// (The entries without a test are in the dense world.)
func starvedInstrument(wasm []byte) ([]byte, error) {
	return InstrumentWith(wasm, Options{Segment: SegmentBytes, Fuel: 0, Unroll: UnrollCopies, TestEntries: true})
}

func newSpecWorld(ctx context.Context, t *testing.T, features api.CoreFeatures, spectest []byte, instr func([]byte) ([]byte, error), refill uint64, yields *int) *specWorld {
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter().WithCoreFeatures(features))
	t.Cleanup(func() { _ = rt.Close(ctx) })
	_, err := rt.NewHostModuleBuilder(YieldModule).NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, _ api.Module, s []uint64) { *yields++; s[0] = refill }),
			nil, []api.ValueType{api.ValueTypeI32}).Export(YieldImport).Instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := &specWorld{rt: rt, named: map[string]api.Module{}, instr: instr}
	if instr != nil {
		yc, err := instr(spectest)
		if err != nil {
			t.Fatal(err)
		}
		spectest = yc
	}
	if _, err := rt.InstantiateWithConfig(ctx, spectest, wazero.NewModuleConfig().WithName("spectest")); err != nil {
		t.Fatal(err)
	}
	return w
}

// specOutcome is what a command did: its results, or its error's first line with indices
// blanked (a wazero message may name a function by index, and the instrumented module's
// defined functions are numbered one up).
type specOutcome struct {
	results []uint64
	err     string
}

var indexInMessage = regexp.MustCompile(`\[\d+\]|\$\d+`)

func outcomeOf(results []uint64, err error) specOutcome {
	if err == nil {
		return specOutcome{results: results}
	}
	msg, _, _ := strings.Cut(err.Error(), "\n")
	return specOutcome{err: indexInMessage.ReplaceAllString(msg, "[]")}
}

func (o specOutcome) equal(p specOutcome) bool {
	return o.err == p.err && slices.Equal(o.results, p.results)
}

func (o specOutcome) String() string {
	if o.err != "" {
		return "error " + strconv.Quote(o.err)
	}
	return fmt.Sprint(o.results)
}

func runSpecScript(t *testing.T, st *specStats, name, path string, spectest []byte, features api.CoreFeatures, beyond bool) {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var script specScript
	if err := json.Unmarshal(raw, &script); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	ctx := context.Background()
	orig := newSpecWorld(ctx, t, features, spectest, nil, 0, &st.yields)
	// With the usual checks every check calls yield (starvedInstrument); with a check between
	// every two instructions that would take long, so the fast path runs there.
	worlds := []*specWorld{
		newSpecWorld(ctx, t, features, spectest, starvedInstrument, 0, &st.yields),
		newSpecWorld(ctx, t, features, spectest, denseInstrument, Refill, &st.yields),
	}
	read := func(file string) []byte {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(path), file))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return b
	}
	cmds := script.Commands
	for i := 0; i < len(cmds); i++ {
		c := cmds[i]
		where := fmt.Sprintf("%s:%d %s", name, c.Line, c.Type)
		switch c.Type {
		case "module", "assert_uninstantiable", "assert_unlinkable":
			if c.ModuleType == "text" {
				continue
			}
			wasm := read(c.Filename)
			reg := ""
			if c.Type == "module" {
				st.modules++
				if i+1 < len(cmds) && cmds[i+1].Type == "register" {
					reg = cmds[i+1].As
					i++
				}
			} else {
				st.assertions++
			}
			mo, eo := orig.instantiate(ctx, wasm, reg, c.Name)
			for k, inst := range worlds {
				mi, ei := inst.instantiate(ctx, wasm, reg, c.Name)
				if inst.refused != nil && k == 0 {
					if beyond {
						st.refusedBeyond = append(st.refusedBeyond, name+" "+c.Filename)
					} else {
						st.refused = append(st.refused, where+" "+c.Filename+": "+inst.refused.Error())
					}
				}
				if o, p := outcomeOf(nil, eo), outcomeOf(nil, ei); !o.equal(p) {
					st.differ(where, "%s: original %v, instrumented (%d) %v", c.Filename, o, k, p)
				}
				if c.Type == "module" && (mo == nil) != (mi == nil) {
					st.differ(where, "%s: instantiated in one runtime only", c.Filename)
				}
			}
		case "register":
			// Always right after its module, which took the name (wazero's spec harness too).
			st.differ(where, "register not right after a module")
		case "assert_invalid", "assert_malformed":
			if c.ModuleType == "text" {
				continue
			}
			st.assertions++
			wasm := read(c.Filename)
			_, eo := orig.instantiate(ctx, wasm, "", "")
			for k, inst := range worlds {
				_, ei := inst.instantiate(ctx, wasm, "", "")
				if o, p := outcomeOf(nil, eo), outcomeOf(nil, ei); eo == nil || !o.equal(p) {
					st.differ(where, "%s: original %v, instrumented (%d) %v; want the same error", c.Filename, o, k, p)
				}
			}
			if !beyond { // beyond wqhost's features the rewriter does not know every rule
				checkInvalid(ctx, st, orig.rt, where+" "+c.Filename, wasm)
			}
		case "assert_return", "assert_trap", "assert_exhaustion", "assert_exception", "action":
			st.assertions++
			o := orig.do(ctx, c.Action)
			for k, inst := range worlds {
				if p := inst.do(ctx, c.Action); !o.equal(p) {
					st.differ(where, "%s %v: original %v, instrumented (%d) %v", c.Action.Field, c.Action.Args, o, k, p)
				}
			}
			if c.Type == "assert_return" && !specExpected(o, c.Expected) {
				st.specMismatches++
				if st.specMismatches <= 10 {
					t.Errorf("%s: %s: original returned %v, the suite expects %v", where, c.Action.Field, o, c.Expected)
				}
			}
			if (c.Type == "assert_trap" || c.Type == "assert_exhaustion") && o.err == "" {
				st.specMismatches++
				t.Errorf("%s: %s: original returned %v, the suite expects a trap", where, c.Action.Field, o)
			}
		default:
			t.Fatalf("%s: unknown command", where)
		}
	}
}

// instantiate instantiates wasm (instrumented first in the instrumented world, after a
// validation of the original, like Engine.Compile) under the registered name reg, and
// remembers it under the script's name.
func (w *specWorld) instantiate(ctx context.Context, wasm []byte, reg, name string) (api.Module, error) {
	w.refused = nil
	cm, err := w.rt.CompileModule(ctx, wasm)
	if err != nil {
		return nil, err
	}
	if w.instr != nil {
		yc, err := w.instr(wasm)
		switch {
		case errors.Is(err, ErrUndecodable):
			w.refused = err // the host runs it uninstrumented
		case err != nil:
			return nil, err
		default:
			_ = cm.Close(ctx)
			if cm, err = w.rt.CompileModule(ctx, yc); err != nil {
				return nil, fmt.Errorf("instrumented module invalid: %w", err)
			}
		}
	}
	m, err := w.rt.InstantiateModule(ctx, cm, wazero.NewModuleConfig().WithName(reg))
	if err != nil {
		return nil, err
	}
	w.last = m
	if name != "" {
		w.named[name] = m
	}
	return m, nil
}

// do runs an action: invoke a function or get a global.
func (w *specWorld) do(ctx context.Context, a specAction) specOutcome {
	m := w.last
	if a.Module != "" {
		m = w.named[a.Module]
	}
	if m == nil {
		return specOutcome{err: "no module"}
	}
	switch a.Type {
	case "invoke":
		fn := m.ExportedFunction(a.Field)
		if fn == nil {
			return specOutcome{err: "no function " + a.Field}
		}
		var args []uint64
		for _, v := range a.Args {
			args = append(args, v.bits()...)
		}
		res, err := fn.Call(ctx, args...)
		// A function reference is a pointer of the runtime that made it: only whether it
		// is null compares across runtimes.
		pos := 0
		for _, vt := range fn.Definition().ResultTypes() {
			switch vt {
			case api.ValueTypeI32, api.ValueTypeI64, api.ValueTypeF32, api.ValueTypeF64, api.ValueTypeExternref:
			case 0x7b: // v128, two words
				pos++
			default:
				if pos < len(res) && res[pos] != 0 {
					res[pos] = 1
				}
			}
			pos++
		}
		return outcomeOf(res, err)
	case "get":
		g := m.ExportedGlobal(a.Field)
		if g == nil {
			return specOutcome{err: "no global " + a.Field}
		}
		return specOutcome{results: []uint64{g.Get()}}
	}
	return specOutcome{err: "unknown action " + a.Type}
}

// checkInvalid: the rewriter itself neither panics on a module the suite calls invalid or
// malformed (which the validation before it refuses: the caller checks that) nor turns one
// wazero's validation refuses into a valid one (a reference one past the module's own
// globals or types landing on the ones instrumenting adds).
func checkInvalid(ctx context.Context, st *specStats, rt wazero.Runtime, where string, wasm []byte) {
	cm, err := rt.CompileModule(ctx, wasm)
	if err == nil {
		// Refused at instantiation (a global.get of a non-imported global in a constant
		// expression, which wazero checks there).
		_ = cm.Close(ctx)
		return
	}
	yc, err := Instrument(wasm)
	if err != nil {
		return
	}
	if cm, err := rt.CompileModule(ctx, yc); err == nil {
		_ = cm.Close(ctx)
		st.invalidMadeValid = append(st.invalidMadeValid, where)
	}
}

// bits is the value as wazero passes it: externref n as n+1 (0 is null, as wazero's own
// harness does), v128 as two words.
func (v specValue) bits() []uint64 {
	if v.Type == "v128" {
		lanes, _ := v.Value.([]any)
		var lo, hi uint64
		width := 128 / max(len(lanes), 1)
		for i, l := range lanes {
			s, _ := l.(string)
			x := parseSpecInt(s, width)
			if pos := i * width; pos < 64 {
				lo |= x << pos
			} else {
				hi |= x << (pos - 64)
			}
		}
		return []uint64{lo, hi}
	}
	s, _ := v.Value.(string)
	switch {
	case s == "" || s == "null":
		return []uint64{0}
	case v.Type == "externref":
		return []uint64{parseSpecInt(s, 64) + 1}
	case v.Type == "i32" || v.Type == "f32":
		return []uint64{parseSpecInt(s, 32)}
	}
	return []uint64{parseSpecInt(s, 64)}
}

func parseSpecInt(s string, width int) uint64 {
	if strings.HasPrefix(s, "-") {
		n, _ := strconv.ParseInt(s, 10, width)
		if width == 64 {
			return uint64(n)
		}
		return uint64(n) & (1<<width - 1)
	}
	n, _ := strconv.ParseUint(s, 10, width)
	return n
}

// specExpected reports whether o is the result the suite expects: NaN patterns match any
// NaN, a reference without a value matches any reference.
func specExpected(o specOutcome, exps []specValue) bool {
	if o.err != "" {
		return false
	}
	r := o.results
	for _, e := range exps {
		n := 1
		if e.Type == "v128" {
			n = 2
		}
		if len(r) < n {
			return false
		}
		got := r[:n]
		r = r[n:]
		if e.Value == nil {
			continue
		}
		if e.Type != "v128" {
			if !laneMatches(got[0], e.Type, e.Value) {
				return false
			}
			continue
		}
		lanes, _ := e.Value.([]any)
		width := 128 / max(len(lanes), 1)
		for i, l := range lanes {
			w := got[0]
			pos := i * width
			if pos >= 64 {
				w, pos = got[1], pos-64
			}
			if !laneMatches(w>>pos&(uint64(1)<<width-1), e.LaneType, l) {
				return false
			}
		}
	}
	return len(r) == 0
}

func laneMatches(got uint64, typ string, want any) bool {
	s, _ := want.(string)
	if strings.HasPrefix(s, "nan:") {
		switch typ {
		case "f32":
			return math.IsNaN(float64(math.Float32frombits(uint32(got))))
		case "f64":
			return math.IsNaN(math.Float64frombits(got))
		}
	}
	exp := specValue{Type: typ, Value: want}.bits()[0]
	switch typ {
	case "i32", "f32":
		return uint32(got) == uint32(exp)
	case "i8":
		return uint8(got) == uint8(parseSpecInt(s, 8))
	case "i16":
		return uint16(got) == uint16(parseSpecInt(s, 16))
	}
	return got == exp
}
