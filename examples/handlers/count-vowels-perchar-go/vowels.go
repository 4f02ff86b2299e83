package main

import (
	"strings"
	"unicode/utf8"
)

// count counts the runes of b found in vowels, as the plugin's
// input.chars().filter(|c| vowels.contains(c)) does: an ASCII byte is compared with each byte
// of vowels in turn (a multi-byte rune's bytes are all 128 or more, so only an ASCII vowel can
// match); any other rune is decoded, invalid UTF-8 as U+FFFD as in a range over a string, and
// searched for. It reads the body in place: a string of it would copy every message's body.
func count(b []byte, vowels string) int {
	n := 0
	for i := 0; i < len(b); {
		if c := b[i]; c < utf8.RuneSelf {
			for j := 0; j < len(vowels); j++ {
				if vowels[j] == c {
					n++
					break
				}
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		i += size
		if strings.ContainsRune(vowels, r) {
			n++
		}
	}
	return n
}
