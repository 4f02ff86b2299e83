package fuel

import (
	"bytes"
	"testing"

	"github.com/wqhost/wqhost/runtime/internal/wasmbin"
)

// Helpers that take an instrumented module apart again (TestInstrumentCommittedModules).

func sectionOf(t testing.TB, wasm []byte, id byte) []byte {
	r := &wasmbin.Reader{Buf: wasm, Pos: 8}
	for r.Pos < len(r.Buf) {
		sid := r.Byte()
		p := r.Bytes(int(r.U32()))
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		if sid == id {
			return p
		}
	}
	t.Fatalf("no section %d", id)
	return nil
}

// fuelIndexOf is the fuelIndex Instrument uses for wasm, and the numbers of parameters of
// wasm's defined functions.
func fuelIndexOf(t testing.TB, wasm []byte) (*fuelIndex, []uint32) {
	x := &fuelIndex{}
	var typeParams, params []uint32
	r := &wasmbin.Reader{Buf: wasm, Pos: 8}
	for r.Pos < len(r.Buf) {
		id := r.Byte()
		p := r.Bytes(int(r.U32()))
		var err error
		switch id {
		case wasmbin.SecType:
			typeParams, err = wasmbin.FuncTypeParams(p)
		case wasmbin.SecImport:
			var f, g uint32
			_, f, g, err = wasmbin.CountImports(p, ^uint32(0))
			x.yield = f
			x.fuel += g
		case wasmbin.SecFunc:
			params, err = wasmbin.FuncParams(p, typeParams)
		case wasmbin.SecGlobal:
			x.fuel += (&wasmbin.Reader{Buf: p}).U32()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	first := x.yield + 1 + uint32(len(params))
	if len(params) > 0 && definesMemory(sectionsOf(t, wasm)) {
		x.bulk = first
		first += 2
	}
	x.types = ^uint32(0)
	lv, err := findLeaves(sectionOf(t, wasm, wasmbin.SecCode), x, params, first)
	if err != nil {
		t.Fatal(err)
	}
	x.leaves = lv
	return x, params
}

func sectionsOf(t testing.TB, wasm []byte) []wasmbin.Section {
	var secs []wasmbin.Section
	r := &wasmbin.Reader{Buf: wasm, Pos: 8}
	for r.Pos < len(r.Buf) {
		id := r.Byte()
		secs = append(secs, wasmbin.Section{ID: id, Payload: r.Bytes(int(r.U32()))})
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	return secs
}

// stripChecks removes what the instrumenter adds (the fuel local, declared last; the entry
// check or charge after the locals; a check after each loop's block type, which it requires; any
// other checks, spills and reloads of the fuel local between instructions) and numbers the
// calls back (the bulk helpers' calls to memory.fill and memory.copy, and the helpers gone),
// failing if a check or a helper is malformed. It expects a module instrumented without
// unrolling. Function indices come out minimally encoded. With a nil x it expects nothing
// added and only re-encodes the indices. No valid original code holds an addition's bytes:
// each starts with global.get of the fuel global or local.get of the fuel local, which the
// original lacks.
func stripChecks(t testing.TB, code []byte, x *fuelIndex, params []uint32) ([]byte, int) {
	r := &wasmbin.Reader{Buf: code}
	n := r.U32()
	if x != nil && x.bulk != 0 {
		n -= 2 // the helpers, after the module's own
	}
	original := map[uint32]uint32{} // a leaf's copy's index: the leaf's, in the original
	if x != nil {
		n -= uint32(len(x.leaves.copies)) // the leaves' copies, last
		for f, c := range x.leaves.copyOf {
			original[c] = x.yield + f
		}
	}
	out := wasmbin.AppendU32(nil, n)
	checks := 0
	for f := range n {
		src := r.Bytes(int(r.U32()))
		br := &wasmbin.Reader{Buf: src}
		groups := br.U32()
		var body []byte
		fl := uint64(params[f])
		if x != nil {
			groups--
		}
		body = wasmbin.AppendU32(body, groups)
		start := br.Pos
		for range groups {
			fl += uint64(br.U32())
			br.Byte()
		}
		body = append(body, src[start:br.Pos]...)
		if x != nil {
			if g := br.Bytes(2); !bytes.Equal(g, []byte{0x01, 0x7f}) {
				t.Fatalf("function %d: the last locals are % x, want one i32", f, g)
			}
		}
		// What the instrumenter adds: checks, with a charge of 5 bytes at offset at, and
		// other instructions.
		type added struct {
			code  []byte
			at    int  // the charge's offset; 0: none
			where byte // 'e': at the entry only, 'i': between instructions only, 0: both
		}
		var adds []added
		if x != nil {
			// at is where the charge is: the first byte that differs with another charge.
			at := func(f func(uint32) []byte) int {
				a, b := f(0), f(1)
				for i := range a {
					if a[i] != b[i] {
						return i
					}
				}
				t.Fatal("the charge does not show")
				return 0
			}
			check := func(entry bool) func(uint32) []byte {
				return func(c uint32) []byte { return x.appendCheck(nil, uint32(fl), c, entry) }
			}
			entryCharge := func(c uint32) []byte { return x.appendEntryCharge(nil, uint32(fl), c) }
			globalCharge := func(c uint32) []byte { return x.appendGlobalCharge(nil, c) }
			globalCheck := func(c uint32) []byte { return x.appendGlobalCheck(nil, uint32(fl), c) }
			adds = []added{
				{check(true)(0), at(check(true)), 'e'},
				{entryCharge(0), at(entryCharge), 'e'},
				{globalCharge(0), at(globalCharge), 'e'},
				{globalCheck(0), at(globalCheck), 0},
				{check(false)(0), at(check(false)), 'i'},
				{x.appendSpill(nil, uint32(fl)), 0, 'i'},
				{x.appendReload(nil, uint32(fl)), 0, 'i'},
			}
		}
		// skipAdded skips one addition at br.Pos (only an entry's form at the function's
		// entry, none of them elsewhere) and reports whether it did and whether it was a
		// check. Additions start with global.get $fuel or local.get $f, which the original
		// code never holds: such bytes that match no addition fail the test.
		skipAdded := func(entry bool) (found, check bool) {
			if x == nil {
				return false, false
			}
			for _, a := range adds {
				got := src[br.Pos:min(br.Pos+len(a.code), len(src))]
				head := len(a.code) // the bytes before the charge, or all
				if a.at != 0 {
					head = a.at
				}
				switch {
				case a.where == 'e' && !entry, a.where == 'i' && entry, len(got) < len(a.code),
					!bytes.Equal(got[:head], a.code[:head]),
					a.at != 0 && !bytes.Equal(got[a.at+5:], a.code[a.at+5:]):
					continue
				}
				if a.at != 0 {
					if c := (&wasmbin.Reader{Buf: got[a.at:]}).LEB(5); c == 0 || c > Refill {
						t.Fatalf("function %d: charge %d", f, c)
					}
					checks++
				}
				br.Bytes(len(a.code))
				return true, a.at != 0
			}
			// global.get $fuel or local.get $f, a check's first instruction after its blocks.
			get := func(a added) []byte { return a.code[4 : a.at-1] }
			if bytes.HasPrefix(src[br.Pos:], get(adds[0])) || bytes.HasPrefix(src[br.Pos:], get(adds[4])) {
				t.Fatalf("function %d: a malformed check at offset %d", f, br.Pos)
			}
			return false, false
		}
		// skipAll skips every addition at br.Pos and reports how many checks there were.
		skipAll := func() int {
			n := 0
			for {
				found, check := skipAdded(false)
				if !found {
					return n
				}
				if check {
					n++
				}
			}
		}
		if found, _ := skipAdded(true); x != nil && !found {
			t.Fatalf("function %d: no entry check", f)
		}
		for depth := 1; depth > 0; {
			skipAll()
			at := br.Pos
			op := br.Byte()
			im, err := wasmbin.SkipImmediates(br, op)
			if err != nil {
				t.Fatalf("function %d: %v", f, err)
			}
			if op == 0x10 && x != nil && x.bulk != 0 && (im.Idx == x.bulk || im.Idx == x.bulk+1) {
				body = append(body, [][]byte{{0xfc, 0x0b, 0x00}, {0xfc, 0x0a, 0x00, 0x00}}[im.Idx-x.bulk]...)
			} else if o, ok := original[im.Idx]; ok && op == 0x10 {
				body = wasmbin.AppendU32(append(body, op), o)
			} else if im.FuncIdx {
				switch {
				case x == nil:
				case im.Idx == x.yield:
					t.Fatalf("function %d: calls yield outside a check", f)
				case im.Idx > x.yield:
					im.Idx--
				}
				body = wasmbin.AppendU32(append(body, op), im.Idx)
			} else {
				body = append(body, src[at:br.Pos]...)
			}
			switch op {
			case 0x02, 0x03, 0x04:
				depth++
			case 0x0b:
				depth--
			}
			if op == 0x03 && skipAll() == 0 && x != nil {
				t.Fatalf("function %d: no check at offset %d", f, br.Pos)
			}
		}
		out = wasmbin.AppendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	if x != nil && x.bulk != 0 {
		rest := bulkHelpers(nil, x)
		if got := code[r.Pos:min(r.Pos+len(rest), len(code))]; !bytes.Equal(got, rest) {
			t.Fatalf("the bulk helpers are % x, want % x", got, rest)
		}
		r.Pos += len(rest)
	}
	// Each copy is its leaf's body with one more local, the unused fuel local.
	var copies []uint32
	if x != nil {
		copies = x.leaves.copies
	}
	for k, f := range copies {
		src, leaf := r.Bytes(int(r.U32())), x.leaves.bodies[k]
		lr := &wasmbin.Reader{Buf: leaf}
		groups := lr.U32()
		code, _, err := bodyLocals(leaf)
		if err != nil {
			t.Fatal(err)
		}
		want := append(append(wasmbin.AppendU32(nil, groups+1), leaf[lr.Pos:code]...), 0x01, 0x7f)
		if !bytes.Equal(src, append(want, leaf[code:]...)) {
			t.Fatalf("the copy of function %d is % x, want its body % x with the fuel local", f, src, leaf)
		}
	}
	if r.Err != nil || r.Pos != len(code) {
		t.Fatalf("%v, %d bytes left", r.Err, len(code)-r.Pos)
	}
	return out, checks
}
