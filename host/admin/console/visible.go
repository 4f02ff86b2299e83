package console

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// visible makes text a guest or a message wrote (a reason, a body, an id, an attribute)
// show every character it holds, as the CLI does (cmd/wqhost's termSafe): bidi controls
// (U+202A–U+202E, U+2066–U+2069, U+200E, U+200F, U+061C), which reorder the text around
// them so that a reason can read as something it is not, line and paragraph separators,
// other control characters and bytes that are not UTF-8 are shown as Go escapes (\u202e,
// \x1b). Line feeds and tabs stay: a page lays them out without forging anything.
// Backslashes stay too, unlike the CLI: a body's own "\u202e" then reads like an escaped
// one, which hides nothing, while doubling them would garble every JSON body shown.
func visible(s string) string {
	if plain(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || unicode.Is(unicode.Bidi_Control, r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
		i += n
	}
	return b.String()
}

// plain reports whether s is printable ASCII, line feeds and tabs: the common case,
// returned as is.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\n' && c != '\t') || c >= 0x7f {
			return false
		}
	}
	return true
}
