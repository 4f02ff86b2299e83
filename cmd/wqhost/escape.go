package main

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// termSafe makes text that came from a guest or a message (a reason, an id, a body) safe to
// print on a terminal: every control character (ESC starting a CSI or OSC sequence, NUL, BEL,
// DEL, the C1 range, and line breaks, which would forge table rows) and every byte that is
// not UTF-8 is shown as a Go escape (\x1b, \u009b) instead of being sent to the terminal.
func termSafe(s string) string {
	if isPlain(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || unicode.Is(unicode.Bidi_Control, r):
			fmt.Fprintf(&b, `\u%04x`, r)
		case r == '\\':
			b.WriteString(`\\`)
		default:
			b.WriteRune(r)
		}
		i += n
	}
	return b.String()
}

// isPlain reports whether s is printable ASCII without backslashes: the common case,
// returned as is.
func isPlain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '\\' {
			return false
		}
	}
	return true
}

// jsonTermSafe escapes what encoding/json leaves raw but a terminal acts on: DEL, C1 controls
// and bidi overrides. They can occur only inside JSON strings, where \uXXXX means the same.
func jsonTermSafe(js []byte) string {
	var b strings.Builder
	for _, r := range string(js) {
		if r == 0x7f || (r >= 0x80 && r < 0xa0) || unicode.Is(unicode.Bidi_Control, r) {
			fmt.Fprintf(&b, `\u%04x`, r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
