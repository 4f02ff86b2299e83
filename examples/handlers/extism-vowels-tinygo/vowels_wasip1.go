//go:build wasip1

package main

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

const defaultVowels = "aeiouAEIOU"

// countVowels counts the runes of b that appear in vowels.
func countVowels(b []byte, vowels string) int {
	n := 0
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		b = b[size:]
		if strings.ContainsRune(vowels, r) {
			n++
		}
	}
	return n
}

// appendResult writes the plugin's output object, field for field.
func appendResult(dst []byte, count, total int, vowels string) []byte {
	dst = append(dst, `{"count":`...)
	dst = strconv.AppendInt(dst, int64(count), 10)
	dst = append(dst, `,"total":`...)
	dst = strconv.AppendInt(dst, int64(total), 10)
	dst = append(dst, `,"vowels":`...)
	dst = strconv.AppendQuote(dst, vowels)
	return append(dst, '}')
}
