//go:build wasip1

package main

// A minimal Extism PDK for TinyGo: the extism:host/env functions and helpers over them (the
// Extism Go PDK is not on the module proxy). `wqhost new extism` writes this file into new
// projects.

import "encoding/binary"

// The extism:host/env functions the plugin uses. Offsets are handles of the host's memory
// blocks, reached only through these calls.

//go:wasmimport extism:host/env input_length
func inputLength() uint64

//go:wasmimport extism:host/env input_load_u64
func inputLoadU64(off uint64) uint64

//go:wasmimport extism:host/env input_load_u8
func inputLoadU8(off uint64) uint32

//go:wasmimport extism:host/env alloc
func alloc(n uint64) uint64

//go:wasmimport extism:host/env free
func free(off uint64)

//go:wasmimport extism:host/env length
func length(off uint64) uint64

//go:wasmimport extism:host/env load_u64
func loadU64(off uint64) uint64

//go:wasmimport extism:host/env load_u8
func loadU8(off uint64) uint32

//go:wasmimport extism:host/env store_u64
func storeU64(off, v uint64)

//go:wasmimport extism:host/env store_u8
func storeU8(off uint64, v uint32)

//go:wasmimport extism:host/env output_set
func outputSet(off, n uint64)

//go:wasmimport extism:host/env error_set
func errorSet(off uint64)

//go:wasmimport extism:host/env config_get
func configGet(key uint64) uint64

//go:wasmimport extism:host/env var_get
func varGet(key uint64) uint64

//go:wasmimport extism:host/env var_set
func varSet(key, val uint64)

// input reads the whole input, a word at a time.
func input() []byte {
	n := inputLength()
	b := make([]byte, n)
	i := uint64(0)
	for ; i+8 <= n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], inputLoadU64(i))
	}
	for ; i < n; i++ {
		b[i] = byte(inputLoadU8(i))
	}
	return b
}

// store copies b into a new block and returns its offset (0 for an empty b).
func store(b []byte) uint64 {
	off := alloc(uint64(len(b)))
	i := 0
	for ; i+8 <= len(b); i += 8 {
		storeU64(off+uint64(i), binary.LittleEndian.Uint64(b[i:]))
	}
	for ; i < len(b); i++ {
		storeU8(off+uint64(i), uint32(b[i]))
	}
	return off
}

// load copies the block at off out and frees it.
func load(off uint64) []byte {
	n := length(off)
	b := make([]byte, n)
	i := uint64(0)
	for ; i+8 <= n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], loadU64(off+i))
	}
	for ; i < n; i++ {
		b[i] = byte(loadU8(off + i))
	}
	free(off)
	return b
}

func config(key string) (string, bool) {
	k := store([]byte(key))
	v := configGet(k)
	free(k)
	if v == 0 {
		return "", false
	}
	return string(load(v)), true
}
