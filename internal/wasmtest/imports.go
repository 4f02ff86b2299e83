package wasmtest

// ModuleImporting is Spec{Imports: imports, MemPages: pages, Funcs: fs}.Bytes(): the imported
// functions take indices 0..len(imports)-1 (Call(i) calls imports[i]) and the module's own
// functions follow, and the exported memory has pages pages (at least 1).
func ModuleImporting(imports []Import, pages int, fs ...Func) []byte {
	return Spec{Imports: imports, Funcs: fs, MemPages: uint32(max(pages, 1))}.Bytes()
}

// RandomGet is WASI's random_get(buf, len) -> errno.
var RandomGet = Import{Module: "wasi_snapshot_preview1", Name: "random_get", Params: []byte{I32, I32}, Results: []byte{I32}}

// RandomGetLoop is an endless loop filling the n bytes at address 0 with random_get, which
// must be import 0: a guest that spends nearly all its time inside a host call.
func RandomGetLoop(n int32) []byte {
	return Forever(I32Const(0), I32Const(n), Call(0), Drop)
}
