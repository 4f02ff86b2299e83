package visible

import "testing"

// TestModes: a terminal and a page show the same hidden characters the same way; only line
// feeds, tabs and backslashes differ, each where it could forge something.
func TestModes(t *testing.T) {
	for _, tc := range []struct{ in, terminal, page string }{
		{"plain text", "plain text", "plain text"},
		{"a\u202eb", `a\u202eb`, `a\u202eb`},
		{"line\nnext\ttab", `line\x0anext\x09tab`, "line\nnext\ttab"},
		{`back\slash`, `back\\slash`, `back\slash`},
		{"esc\x1b[31m", `esc\x1b[31m`, `esc\x1b[31m`},
		{"bad\xffbyte", `bad\xffbyte`, `bad\xffbyte`},
		{"c1\u009bsep\u2028", `c1\u009bsep\u2028`, `c1\u009bsep\u2028`},
		{"\u2066iso\u2069 \u200e\u061c", `\u2066iso\u2069 \u200e\u061c`, `\u2066iso\u2069 \u200e\u061c`},
	} {
		if got := Terminal(tc.in); got != tc.terminal {
			t.Errorf("Terminal(%q) = %q; want %q", tc.in, got, tc.terminal)
		}
		if got := Page(tc.in); got != tc.page {
			t.Errorf("Page(%q) = %q; want %q", tc.in, got, tc.page)
		}
	}
}
