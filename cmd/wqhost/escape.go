package main

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/wqhost/wqhost/internal/visible"
)

// termSafe makes text that came from a guest or a message (a reason, an id, a body) safe to
// print on a terminal (internal/visible.Terminal).
func termSafe(s string) string { return visible.Terminal(s) }

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
