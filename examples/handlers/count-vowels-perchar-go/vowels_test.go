package main

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// countNaive is the plugin's logic written the obvious way, the reference count must agree
// with.
func countNaive(b []byte, vowels string) int {
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

func TestCountVowels(t *testing.T) {
	tests := []struct {
		in, vowels string
		want       int
	}{
		{"hello world", defaultVowels, 3},
		{"aaaaaa", defaultVowels, 6},
		{"", defaultVowels, 0},
		{"bbbbbbb", defaultVowels, 0},
		{"ÀEIOU é", defaultVowels, 4},
		{"ÀEIOU é", "Àé", 2}, // vowels outside ASCII
		{"hello world", "o", 2},
		{"hello world", "", 0},
		{"a\xffe", defaultVowels, 2},   // invalid UTF-8 is U+FFFD, as in a range over a string
		{"a\xef\xbf\xbd", "\ufffd", 1}, // and counts as that rune
		{"a\xffe\xef\xbf\xbd", "\ufffd", 2},
		{"a\xffe", "a\xff", 2}, // a set with invalid UTF-8 matches U+FFFD (strings.ContainsRune)
	}
	for _, tc := range tests {
		if got := count([]byte(tc.in), tc.vowels); got != tc.want {
			t.Errorf("count(%q) with vowels %q = %d, want %d", tc.in, tc.vowels, got, tc.want)
		}
	}
}

// FuzzCountVowels checks count against the naive loop on any body and set.
func FuzzCountVowels(f *testing.F) {
	f.Add([]byte("The quick brown fox"), defaultVowels)
	f.Add([]byte("ÀEIOU é\xff"), "Àé\ufffd")
	f.Add([]byte("a\xffe"), "a\xff")
	f.Fuzz(func(t *testing.T, body []byte, vowels string) {
		if got, want := count(body, vowels), countNaive(body, vowels); got != want {
			t.Errorf("count(%q) with vowels %q = %d, the naive loop %d", body, vowels, got, want)
		}
	})
}

func TestAppendResultMatchesPlugin(t *testing.T) {
	// The exact bytes Extism's count_vowels returns for "aaa" then "bbba" (go-sdk tests).
	if got := string(appendResult(nil, defaultVowels, 3, 3)); got != `{"count":3,"total":3,"vowels":"aeiouAEIOU"}` {
		t.Errorf("got %s", got)
	}
	if got := string(appendResult(nil, defaultVowels, 1, 4)); got != `{"count":1,"total":4,"vowels":"aeiouAEIOU"}` {
		t.Errorf("got %s", got)
	}
}
