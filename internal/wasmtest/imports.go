package wasmtest

import "encoding/binary"

// Import is a function a module imports.
type Import struct {
	Module, Name    string
	Params, Results []byte // value types
}

// ModuleImporting is Module with imports: the imported functions take indices 0..len(imports)-1
// (Call(i) calls imports[i]) and the module's own functions follow, and the exported memory
// has pages pages (at least 1).
func ModuleImporting(imports []Import, pages int, fs ...Func) []byte {
	uleb := func(b []byte, v int) []byte { return binary.AppendUvarint(b, uint64(v)) }
	name := func(b []byte, s string) []byte { return append(uleb(b, len(s)), s...) }
	section := func(mod []byte, id byte, body []byte) []byte {
		return append(uleb(append(mod, id), len(body)), body...)
	}
	sig := func(b, params, results []byte) []byte {
		b = append(b, 0x60)
		b = append(uleb(b, len(params)), params...)
		return append(uleb(b, len(results)), results...)
	}
	types := uleb(nil, len(imports)+len(fs))
	imps := uleb(nil, len(imports))
	for i, im := range imports {
		types = sig(types, im.Params, im.Results)
		imps = append(name(name(imps, im.Module), im.Name), 0x00)
		imps = uleb(imps, i)
	}
	funcs, code := uleb(nil, len(fs)), uleb(nil, len(fs))
	exports := uleb(nil, len(fs)+1)
	for i, f := range fs {
		types = sig(types, f.Params, f.Results)
		funcs = uleb(funcs, len(imports)+i)
		exports = append(name(exports, f.Export), 0x00)
		exports = uleb(exports, len(imports)+i)
		body := append(append([]byte{0x00}, f.Body...), 0x0b)
		code = append(uleb(code, len(body)), body...)
	}
	exports = append(name(exports, "memory"), 0x02, 0x00)
	mod := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}
	mod = section(mod, 1, types)
	mod = section(mod, 2, imps)
	mod = section(mod, 3, funcs)
	mod = section(mod, 5, uleb([]byte{0x01, 0x00}, max(pages, 1))) // one memory, min pages
	mod = section(mod, 7, exports)
	return section(mod, 10, code)
}

// Drop is the instruction dropping the top of the stack.
const Drop byte = 0x1a

// LoopDoing is an endless loop running body each time round: loop; body; br 0; end.
func LoopDoing(body ...byte) []byte {
	return append(append([]byte{0x03, 0x40}, body...), 0x0c, 0x00, 0x0b)
}

// RandomGet is WASI's random_get(buf, len) -> errno.
var RandomGet = Import{Module: "wasi_snapshot_preview1", Name: "random_get", Params: []byte{I32, I32}, Results: []byte{I32}}

// RandomGetLoop is an endless loop filling the n bytes at address 0 with random_get, which
// must be import 0: a guest that spends nearly all its time inside a host call.
func RandomGetLoop(n int32) []byte {
	body := append(append(I32Const(0), I32Const(n)...), Call(0)...)
	return LoopDoing(append(body, Drop)...)
}
