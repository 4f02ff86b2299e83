package runtime

import (
	"bytes"
	"testing"
)

// Helpers that take an instrumented module apart again (TestInstrumentCommittedModules).

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

// fuelIndexOf is the fuelIndex instrument uses for wasm, and the numbers of parameters of
// wasm's defined functions.
func fuelIndexOf(t testing.TB, wasm []byte) (*fuelIndex, []uint32) {
	x := &fuelIndex{}
	var typeParams, params []uint32
	r := &reader{b: wasm, i: 8}
	for r.i < len(r.b) {
		id := r.byte()
		p := r.bytes(int(r.u32()))
		var err error
		switch id {
		case secType:
			typeParams, err = funcTypeParams(p)
		case secImport:
			var f, g uint32
			_, f, g, err = countImports(p, ^uint32(0))
			x.yield = f
			x.fuel += g
		case secFunc:
			params, err = funcParams(p, typeParams)
		case secGlobal:
			x.fuel += (&reader{b: p}).u32()
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
	lv, err := findLeaves(sectionOf(t, wasm, secCode), x, params, first)
	if err != nil {
		t.Fatal(err)
	}
	x.leaves = lv
	return x, params
}

func sectionsOf(t testing.TB, wasm []byte) []section {
	var secs []section
	r := &reader{b: wasm, i: 8}
	for r.i < len(r.b) {
		id := r.byte()
		secs = append(secs, section{id, r.bytes(int(r.u32()))})
		if r.err != nil {
			t.Fatal(r.err)
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
	r := &reader{b: code}
	n := r.u32()
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
	out := appendU32(nil, n)
	checks := 0
	for f := range n {
		src := r.bytes(int(r.u32()))
		br := &reader{b: src}
		groups := br.u32()
		var body []byte
		fl := uint64(params[f])
		if x != nil {
			groups--
		}
		body = appendU32(body, groups)
		start := br.i
		for range groups {
			fl += uint64(br.u32())
			br.byte()
		}
		body = append(body, src[start:br.i]...)
		if x != nil {
			if g := br.bytes(2); !bytes.Equal(g, []byte{0x01, 0x7f}) {
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
		// skipAdded skips one addition at br.i (only an entry's form at the function's
		// entry, none of them elsewhere) and reports whether it did and whether it was a
		// check. Additions start with global.get $fuel or local.get $f, which the original
		// code never holds: such bytes that match no addition fail the test.
		skipAdded := func(entry bool) (found, check bool) {
			if x == nil {
				return false, false
			}
			for _, a := range adds {
				got := src[br.i:min(br.i+len(a.code), len(src))]
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
					if c := (&reader{b: got[a.at:]}).leb(5); c == 0 || c > fuelRefill {
						t.Fatalf("function %d: charge %d", f, c)
					}
					checks++
				}
				br.bytes(len(a.code))
				return true, a.at != 0
			}
			// global.get $fuel or local.get $f, a check's first instruction after its blocks.
			get := func(a added) []byte { return a.code[4 : a.at-1] }
			if bytes.HasPrefix(src[br.i:], get(adds[0])) || bytes.HasPrefix(src[br.i:], get(adds[4])) {
				t.Fatalf("function %d: a malformed check at offset %d", f, br.i)
			}
			return false, false
		}
		// skipAll skips every addition at br.i and reports how many checks there were.
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
			at := br.i
			op := br.byte()
			im, err := skipImmediates(br, op)
			if err != nil {
				t.Fatalf("function %d: %v", f, err)
			}
			if op == 0x10 && x != nil && x.bulk != 0 && (im.idx == x.bulk || im.idx == x.bulk+1) {
				body = append(body, [][]byte{{0xfc, 0x0b, 0x00}, {0xfc, 0x0a, 0x00, 0x00}}[im.idx-x.bulk]...)
			} else if o, ok := original[im.idx]; ok && op == 0x10 {
				body = appendU32(append(body, op), o)
			} else if im.funcIdx {
				switch {
				case x == nil:
				case im.idx == x.yield:
					t.Fatalf("function %d: calls yield outside a check", f)
				case im.idx > x.yield:
					im.idx--
				}
				body = appendU32(append(body, op), im.idx)
			} else {
				body = append(body, src[at:br.i]...)
			}
			switch op {
			case 0x02, 0x03, 0x04:
				depth++
			case 0x0b:
				depth--
			}
			if op == 0x03 && skipAll() == 0 && x != nil {
				t.Fatalf("function %d: no check at offset %d", f, br.i)
			}
		}
		out = appendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	if x != nil && x.bulk != 0 {
		rest := bulkHelpers(nil, x)
		if got := code[r.i:min(r.i+len(rest), len(code))]; !bytes.Equal(got, rest) {
			t.Fatalf("the bulk helpers are % x, want % x", got, rest)
		}
		r.i += len(rest)
	}
	// Each copy is its leaf's body with one more local, the unused fuel local.
	var copies []uint32
	if x != nil {
		copies = x.leaves.copies
	}
	for k, f := range copies {
		src, leaf := r.bytes(int(r.u32())), x.leaves.bodies[k]
		lr := &reader{b: leaf}
		groups := lr.u32()
		code, _, err := bodyLocals(leaf)
		if err != nil {
			t.Fatal(err)
		}
		want := append(append(appendU32(nil, groups+1), leaf[lr.i:code]...), 0x01, 0x7f)
		if !bytes.Equal(src, append(want, leaf[code:]...)) {
			t.Fatalf("the copy of function %d is % x, want its body % x with the fuel local", f, src, leaf)
		}
	}
	if r.err != nil || r.i != len(code) {
		t.Fatalf("%v, %d bytes left", r.err, len(code)-r.i)
	}
	return out, checks
}
