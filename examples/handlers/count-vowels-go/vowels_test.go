package main

import "testing"

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
		{"hello world", "o", 2},
		{"a\xffe", defaultVowels, 2},   // invalid UTF-8 is U+FFFD, as in a range over a string
		{"a\xef\xbf\xbd", "\ufffd", 1}, // and counts as that rune
	}
	for _, tc := range tests {
		if got := countVowels([]byte(tc.in), tc.vowels); got != tc.want {
			t.Errorf("countVowels(%q, %q) = %d, want %d", tc.in, tc.vowels, got, tc.want)
		}
	}
}

func TestAppendResultMatchesPlugin(t *testing.T) {
	// The exact bytes Extism's count_vowels returns for "aaa" then "bbba" (go-sdk tests).
	if got := string(appendResult(nil, 3, 3, defaultVowels)); got != `{"count":3,"total":3,"vowels":"aeiouAEIOU"}` {
		t.Errorf("got %s", got)
	}
	if got := string(appendResult(nil, 1, 4, defaultVowels)); got != `{"count":1,"total":4,"vowels":"aeiouAEIOU"}` {
		t.Errorf("got %s", got)
	}
}
