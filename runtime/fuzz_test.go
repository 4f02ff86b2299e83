package runtime

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	goruntime "runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// fuzzMemPages is the linear memory of the fuzz module: one 64 KiB page, so that random
// pointers land both inside and outside it.
const fuzzMemSize = 65536

// forwarderModule returns a hand-assembled wasm module that imports every wqhost host function
// and exports, for each, "f_<name>" with the same signature that just calls it, plus one page
// of memory. Calling f_<name> through wazero with arbitrary arguments exercises the host
// function exactly as a guest would, without a guest's own checks in the way.
func forwarderModule(fns []hostFn) []byte {
	uleb := func(b []byte, v uint32) []byte { return binary.AppendUvarint(b, uint64(v)) }
	name := func(b []byte, s string) []byte { return append(uleb(b, uint32(len(s))), s...) }
	vt := func(ts []api.ValueType) []byte {
		out := uleb(nil, uint32(len(ts)))
		return append(out, ts...)
	}
	section := func(mod []byte, id byte, body []byte) []byte {
		mod = append(mod, id)
		return append(uleb(mod, uint32(len(body))), body...)
	}
	n := uint32(len(fns))
	types := uleb(nil, n)
	imports := uleb(nil, n)
	funcs := uleb(nil, n)
	exports := uleb(nil, n+1)
	code := uleb(nil, n)
	for i, f := range fns {
		types = append(types, 0x60)
		types = append(types, vt(f.params)...)
		types = append(types, vt(f.results)...)
		imports = name(imports, hostModuleName)
		imports = name(imports, f.name)
		imports = append(imports, 0x00) // func
		imports = uleb(imports, uint32(i))
		funcs = uleb(funcs, uint32(i))
		exports = name(exports, "f_"+f.name)
		exports = append(exports, 0x00)
		exports = uleb(exports, n+uint32(i))
		body := []byte{0x00} // no locals
		for p := range f.params {
			body = append(body, 0x20) // local.get p
			body = uleb(body, uint32(p))
		}
		body = append(body, 0x10) // call i
		body = uleb(body, uint32(i))
		body = append(body, 0x0b) // end
		code = uleb(code, uint32(len(body)))
		code = append(code, body...)
	}
	exports = name(exports, "memory")
	exports = append(exports, 0x02, 0x00)
	mod := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}
	mod = section(mod, 1, types)
	mod = section(mod, 2, imports)
	mod = section(mod, 3, funcs)
	mod = section(mod, 5, []byte{0x01, 0x01, 0x01, 0x01}) // one memory, min 1 max 1 page
	mod = section(mod, 7, exports)
	mod = section(mod, 10, code)
	return mod
}

// FuzzHostFunctions calls each wqhost host function, through wazero, with arbitrary pointers,
// lengths and values. A host function may only trap with a HostCallError, and only when a
// range really lies outside guest memory; it must never panic otherwise, write outside the
// range it was given, or return a value the ABI does not define.
//
// The batch functions take a message index first: which's bits past the function's choose it
// (-1 to 2) and whether the call is a single one (a batch of one) or a batch of two.
func FuzzHostFunctions(f *testing.F) {
	ctx := context.Background()
	fns := append(hostFuncs(), batchHostFuncs()...)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	e, err := NewEngine(ctx, EngineConfig{Logger: logger})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { e.Close(ctx) })
	ten, err := e.Tenant("fuzz", TenantLimits{MemoryPages: 1024})
	if err != nil {
		f.Fatal(err)
	}
	// The host functions read only the pool's config, logger and tenant; a pool built around
	// them keeps each fuzz worker from compiling a whole guest.
	pool := &Pool{t: ten, logger: logger, cfg: PoolConfig{
		Binding: "b", OutputQueue: "out",
		Config: map[string]string{"key": "value", "": "empty"}, MaxOutputs: 4, MaxOutputBytes: 1024, MaxOutputTotalBytes: 2048,
		AllowEmit: func(q string) error {
			if q == "denied" {
				return errors.New("denied")
			}
			return nil
		},
	}}

	forward := forwarders(f, fns)

	// Seeds: each function with in-range, edge and wild arguments.
	for i := range fns {
		f.Add(uint8(i), uint32(0), uint32(16), uint32(64), uint32(32), []byte("id"))
		f.Add(uint8(i), uint32(fuzzMemSize-8), uint32(8), uint32(fuzzMemSize), uint32(0), []byte("key"))
		f.Add(uint8(i), uint32(0xFFFFFF00), uint32(4096), uint32(1), uint32(0xFFFFFFFF), []byte{})
		f.Add(uint8(i), uint32(100), uint32(0x7FFFFFFF), uint32(200), uint32(fuzzMemSize), []byte("dequeue_count"))
		// Valid indices of a single call and of a batch, with small ranges.
		f.Add(uint8(i+len(fns)), uint32(1), uint32(2), uint32(64), uint32(8), []byte("queue"))
		f.Add(uint8(i+6*len(fns)), uint32(2), uint32(2), uint32(64), uint32(8), []byte("id"))
	}
	f.Fuzz(func(t *testing.T, which uint8, a, b, c, d uint32, seed []byte) {
		fn := fns[int(which)%len(fns)]
		extra := int(which) / len(fns)
		idx := int32(extra%4) - 1
		batchCall := extra/4%2 == 1
		mod, pattern := forward(t, seed)
		mem := mod.Memory()

		in := &Input{ID: "msg-1", Queue: "jobs", Body: bytes.Repeat([]byte("body"), 10), DequeueCount: 2, InsertedAt: time.Unix(1700000000, 0)}
		out := &Result{}
		st := &callState{pool: pool}
		if batchCall {
			st.beginBatch([]*Input{in, {ID: "msg-2", Body: []byte("second")}}, out, make([]Result, 2))
		} else {
			st.beginSingle(in, out)
		}
		args := []uint64{uint64(a), uint64(b), uint64(c), uint64(d)}[:min(4, len(fn.params))]
		switch {
		case fn.name == "retry_after":
			args = []uint64{uint64(a)<<32 | uint64(b)}
		case fn.name == "batch_verdict":
			// A status from -1 to 3 (two of them unknown), a signed delay, a reason.
			args = []uint64{i32(idx), i32(int32(a%5) - 1), uint64(int64(int32(b))), uint64(c), uint64(d)}
		case strings.HasPrefix(fn.name, "batch_") && len(fn.params) > 0:
			args = append([]uint64{i32(idx)}, args[:len(fn.params)-1]...)
		}
		var msg *Input // the message the index names, if any
		if idx >= 0 && int(idx) < len(st.batch) {
			msg = st.batch[idx]
		}
		res, err := mod.ExportedFunction("f_"+fn.name).Call(context.WithValue(ctx, stateKey{}, st), args...)

		// Which ranges the function reads or writes: (ptr, len) pairs.
		var ranges [][2]uint32
		var dst [2]uint32
		switch fn.name {
		case "msg_body", "batch_body":
			ranges, dst = [][2]uint32{{a, b}}, [2]uint32{a, b}
		case "msg_meta", "config_get", "batch_meta":
			ranges, dst = [][2]uint32{{a, b}, {c, d}}, [2]uint32{c, d}
		case "emit", "batch_emit":
			ranges = [][2]uint32{{a, b}, {c, d}}
		case "batch_verdict":
			ranges = [][2]uint32{{c, d}}
		case "log":
			ranges = [][2]uint32{{b, c}}
		case "set_error":
			ranges = [][2]uint32{{a, b}}
		}
		after := checkHostCall(t, fn.name, args, ranges, dst, err, mem, pattern)
		if after == nil {
			return
		}
		if len(fn.results) == 0 {
			return
		}
		rc := int32(uint32(res[0]))
		var body []byte // what msg_* read: nothing in a batch call
		if st.in != nil {
			body = in.Body
		}
		if strings.HasPrefix(fn.name, "batch_") && fn.name != "batch_size" && msg == nil {
			if rc != errInvalid {
				t.Fatalf("%s%v: index %d outside a batch of %d: %d, want ERR_INVALID", fn.name, args, idx, len(st.batch), rc)
			}
			return
		}
		switch fn.name {
		case "msg_body_len":
			if rc != int32(len(body)) {
				t.Fatalf("msg_body_len = %d, want %d", rc, len(body))
			}
		case "msg_body":
			if want := min(int(b), len(body)); rc != int32(want) || !bytes.Equal(after[a:a+uint32(want)], body[:want]) {
				t.Fatalf("msg_body(%d, %d) = %d, want %d bytes of the body", a, b, rc, want)
			}
		case "batch_size":
			if rc != int32(len(st.batch)) {
				t.Fatalf("batch_size = %d, want %d", rc, len(st.batch))
			}
		case "batch_body_len":
			if rc != int32(len(msg.Body)) {
				t.Fatalf("batch_body_len(%d) = %d, want %d", idx, rc, len(msg.Body))
			}
		case "batch_body":
			if want := min(int(b), len(msg.Body)); rc != int32(want) || !bytes.Equal(after[a:a+uint32(want)], msg.Body[:want]) {
				t.Fatalf("batch_body(%d, %d, %d) = %d, want %d bytes of the body", idx, a, b, rc, want)
			}
		case "batch_meta":
			if overlong := uint32(args[2]) > maxMetaKeyBytes; rc < 0 && rc != errNotFound && !(overlong && rc == errInvalid) {
				t.Fatalf("batch_meta = %d: neither a length, ERR_NOT_FOUND nor (key of %d bytes) ERR_INVALID", rc, uint32(args[2]))
			}
		case "batch_emit":
			// The output lands with its message: the call's own outputs in a single call.
			got := len(out.Outputs)
			if batchCall {
				got = len(st.res[idx].Outputs) + 10*len(out.Outputs)
			}
			switch rc {
			case 0:
				if got != 1 {
					t.Fatalf("batch_emit(%d) accepted an output that landed elsewhere (%d)", idx, got)
				}
			case errDenied, errTooLarge, errLimit, errInvalid:
				if got != 0 {
					t.Fatalf("batch_emit returned %d but kept an output", rc)
				}
			default:
				t.Fatalf("batch_emit = %d: not an ABI return code", rc)
			}
		case "batch_verdict":
			status := int32(uint32(args[1]))
			switch {
			case status < 0 || status > 2:
				if rc != errInvalid || st.vset[idx] {
					t.Fatalf("batch_verdict(%d, status %d) = %d, want ERR_INVALID and no verdict", idx, status, rc)
				}
			case rc != 0 || !st.vset[idx] || st.res[idx].Verdict != Verdict(status) || !utf8.ValidString(st.res[idx].ErrorText) ||
				len(st.res[idx].ErrorText) > maxLogLine || st.res[idx].RetryAfter < 0:
				t.Fatalf("batch_verdict(%d, %d) = %d, result %+v", idx, status, rc, st.res[idx])
			}
		case "msg_meta", "config_get":
			// A metadata key over maxMetaKeyBytes is refused before it is read (ERR_INVALID).
			overlong := fn.name == "msg_meta" && uint32(args[1]) > maxMetaKeyBytes
			if rc < 0 && rc != errNotFound && !(overlong && rc == errInvalid) {
				t.Fatalf("%s = %d: neither a length, ERR_NOT_FOUND nor (key of %d bytes) ERR_INVALID", fn.name, rc, uint32(args[1]))
			}
		case "emit":
			switch rc {
			case 0:
				if len(out.Outputs) != 1 || len(out.Outputs[0].Body) > 1024 || out.Outputs[0].Queue == "denied" {
					t.Fatalf("emit accepted %+v beyond the pool's limits", out.Outputs)
				}
			case errDenied, errTooLarge, errLimit, errInvalid:
				if len(out.Outputs) != 0 {
					t.Fatalf("emit returned %d but kept an output", rc)
				}
			default:
				t.Fatalf("emit = %d: not an ABI return code", rc)
			}
		}
	})
}

// checkHostCall holds one fuzzed host function call to the memory rules: with every (ptr,
// len) range of ranges inside guest memory it must not trap, with one outside it must trap
// with a HostCallError (never a Go runtime error), and a call that returns leaves every byte
// of mem outside dst as pattern put it. It returns guest memory after the call, or nil when
// the call trapped (and has no result to check). Failures name the call as fn(args).
func checkHostCall(t *testing.T, fn string, args []uint64, ranges [][2]uint32, dst [2]uint32, err error, mem api.Memory, pattern []byte) []byte {
	t.Helper()
	inside := true
	for _, r := range ranges {
		if uint64(r[0])+uint64(r[1]) > fuzzMemSize {
			inside = false
		}
	}
	if err != nil {
		var hce *HostCallError
		var rte goruntime.Error
		switch {
		case errors.As(err, &rte):
			t.Fatalf("%s%v: Go runtime error in a host function: %v", fn, args, err)
		case !errors.As(err, &hce):
			t.Fatalf("%s%v: error that is not a HostCallError: %v", fn, args, err)
		case inside:
			t.Fatalf("%s%v: trapped on ranges %v inside guest memory: %v", fn, args, ranges, err)
		}
		return nil
	}
	if !inside {
		t.Fatalf("%s%v: ranges %v outside guest memory accepted", fn, args, ranges)
	}
	after, _ := mem.Read(0, fuzzMemSize)
	for i := range after {
		if (uint32(i) < dst[0] || uint64(i) >= uint64(dst[0])+uint64(dst[1])) && after[i] != pattern[i] {
			t.Fatalf("%s%v: wrote byte %d outside its destination [%d, %d+%d)", fn, args, i, dst[0], dst[0], dst[1])
		}
	}
	return after
}

// forwarders compiles the forwarder module of fns in a wazero runtime of its own, beside the
// wqhost host module, and returns what instantiates it for one fuzz input: a module whose
// memory is pattern, the seed at 0 (keys the fuzzer can point at) and a known pattern
// elsewhere, closed when the input's test ends.
func forwarders(f *testing.F, fns []hostFn) func(t *testing.T, seed []byte) (mod api.Module, pattern []byte) {
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	f.Cleanup(func() { rt.Close(ctx) })
	if _, err := hostModule(rt).Instantiate(ctx); err != nil {
		f.Fatal(err)
	}
	cm, err := rt.CompileModule(ctx, forwarderModule(fns))
	if err != nil {
		f.Fatalf("forwarder module: %v", err)
	}
	return func(t *testing.T, seed []byte) (api.Module, []byte) {
		t.Helper()
		mod, err := rt.InstantiateModule(ctx, cm, wazero.NewModuleConfig().WithName(""))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { mod.Close(ctx) })
		pattern := make([]byte, fuzzMemSize)
		for i := range pattern {
			pattern[i] = byte(i * 31)
		}
		copy(pattern, seed)
		mod.Memory().Write(0, pattern)
		return mod, pattern
	}
}
