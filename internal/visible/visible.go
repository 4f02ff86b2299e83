// Package visible shows text that came from a guest or a message (a reason, a body, an id,
// an attribute) with every character it holds, so that it cannot pass for something it is
// not where a person reads it: control characters (ESC starting a terminal sequence, NUL,
// BEL, DEL, the C1 range), line and paragraph separators, bidi controls (U+202A–U+202E,
// U+2066–U+2069, U+200E, U+200F, U+061C, which reorder the text around them) and bytes that
// are not UTF-8 are shown as Go escapes (\x1b, \u202e). The CLI and the web console show
// the same characters the same way.
package visible

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Terminal is s for a terminal: line feeds and tabs are escaped too (they would forge table
// rows), and backslashes doubled, so an escape in s reads apart from one Terminal wrote.
func Terminal(s string) string { return escape(s, false) }

// Page is s for a web page: line feeds and tabs stay (a page lays them out without forging
// anything) and so do backslashes: a body's own "\u202e" then reads like an escaped one,
// which hides nothing, while doubling them would garble every JSON body shown.
func Page(s string) string { return escape(s, true) }

func escape(s string, page bool) string {
	if plain(s, page) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case page && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || unicode.Is(unicode.Bidi_Control, r):
			fmt.Fprintf(&b, `\u%04x`, r)
		case r == '\\' && !page:
			b.WriteString(`\\`)
		default:
			b.WriteRune(r)
		}
		i += n
	}
	return b.String()
}

// plain reports whether s needs no escape: printable ASCII (and, on a page, line feeds and
// tabs and backslashes), the common case, returned as is.
func plain(s string, page bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if page && (c == '\n' || c == '\t') {
			continue
		}
		if c < 0x20 || c >= 0x7f || c == '\\' && !page {
			return false
		}
	}
	return true
}
