package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/wqhost/wqhost/host"
)

// TestTermSafe: escape sequences a guest puts in set_error (clear screen, an OSC window
// title, NUL floods, C1 CSI, bidi overrides, invalid UTF-8, line breaks) never reach the
// terminal raw; ordinary text, accents included, is unchanged.
func TestTermSafe(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain reason: 42", "plain reason: 42"},
		{"déjà vu", "déjà vu"},
		{"\x1b[2Jcleared", `\x1b[2Jcleared`},
		{"\x1b]0;pwned\x07title", `\x1b]0;pwned\x07title`},
		{"a\x00\x00b", `a\x00\x00b`},
		{"c1 \u009b31m", `c1 \u009b31m`},
		{"bidi \u202etxt", `bidi \u202etxt`},
		{"bad \xff\xfe utf8", `bad \xff\xfe utf8`},
		{"two\nlines\r", `two\x0alines\x0d`},
		{`back\slash`, `back\\slash`},
	} {
		got := termSafe(tc.in)
		if got != tc.want {
			t.Errorf("termSafe(%q) = %q, want %q", tc.in, got, tc.want)
		}
		for _, c := range got {
			if c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0) {
				t.Errorf("termSafe(%q) still holds control character %U", tc.in, c)
			}
		}
	}
	if got := oneLine(strings.Repeat("\x1b[2J", 50), 100); strings.ContainsRune(got, 0x1b) {
		t.Errorf("oneLine passes ESC: %q", got)
	}
}

// TestPoisonListEscapesGuestText: `poison list` prints a reason holding a clear-screen and
// an OSC title sequence, and an id with a NUL, escaped; --json escapes them too.
func TestPoisonListEscapesGuestText(t *testing.T) {
	ls := []host.DeadLetter{{ID: "id\x00x", Reason: "boom \x1b[2J\x1b]0;owned\x07 \u009b1m", OriginalID: "o\x1bi", DeadLetteredAt: "2026"}}
	for _, asJSON := range []bool{false, true} {
		var out bytes.Buffer
		c := &cli{stdout: &out, stderr: &out}
		p := c.deadPrinter(asJSON)
		for _, d := range ls {
			if err := p.add(d); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.tw.Flush(); err != nil {
			t.Fatal(err)
		}
		p.finish("jobs-poison", false)
		for _, bad := range []string{"\x1b", "\x00", "\x07", "\u009b"} {
			if strings.Contains(out.String(), bad) {
				t.Errorf("json=%v: output holds %q raw:\n%q", asJSON, bad, out.String())
			}
		}
		if !asJSON && !strings.Contains(out.String(), `boom \x1b[2J\x1b]0;owned\x07 \u009b1m`) {
			t.Errorf("reason not shown escaped:\n%s", out.String())
		}
	}
}
