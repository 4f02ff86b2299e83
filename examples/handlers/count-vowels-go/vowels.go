package main

import (
	"strconv"
	"strings"
)

const defaultVowels = "aeiouAEIOU"

// countVowels counts the runes of s that appear in vowels, as the plugin's
// input.chars().filter(|c| vowels.contains(c)) does.
func countVowels(s, vowels string) int {
	n := 0
	for _, r := range s {
		if strings.ContainsRune(vowels, r) {
			n++
		}
	}
	return n
}

// appendResult writes the plugin's output object, field for field, without reflection.
func appendResult(dst []byte, count, total int, vowels string) []byte {
	dst = append(dst, `{"count":`...)
	dst = strconv.AppendInt(dst, int64(count), 10)
	dst = append(dst, `,"total":`...)
	dst = strconv.AppendInt(dst, int64(total), 10)
	dst = append(dst, `,"vowels":`...)
	dst = strconv.AppendQuote(dst, vowels)
	return append(dst, '}')
}
