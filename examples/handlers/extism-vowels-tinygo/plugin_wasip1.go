//go:build wasip1

package main

import (
	"encoding/binary"
	"unicode/utf8"
)

// countVowelsExport is the plugin's function: what Extism's count_vowels does.
//
//go:wasmexport count_vowels
func countVowelsExport() int32 {
	vowels, ok := config("vowels")
	if !ok {
		vowels = defaultVowels
	}
	in := input()
	if !utf8.Valid(in) {
		errorSet(store([]byte("input is not UTF-8 text")))
		return 1
	}
	n := countVowels(in, vowels)
	total := n
	if v := varGet(store([]byte("total"))); v != 0 {
		if b := load(v); len(b) == 8 {
			total += int(binary.LittleEndian.Uint64(b))
		}
	}
	var t [8]byte
	binary.LittleEndian.PutUint64(t[:], uint64(total))
	varSet(store([]byte("total")), store(t[:]))
	out := appendResult(nil, n, total, vowels)
	outputSet(store(out), uint64(len(out)))
	return 0
}
