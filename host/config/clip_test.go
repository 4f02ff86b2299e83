package config

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestHugeValueIsCutInTheError: a megabyte in one key is quoted in the error only in part,
// and the error still names the key path and the reason.
func TestHugeValueIsCutInTheError(t *testing.T) {
	huge := strings.Repeat("q", 1<<20)
	_, err := Parse([]byte(binding("        output: "+huge+"\n")), t.TempDir())
	if err == nil {
		t.Fatal("config accepted")
	}
	msg := err.Error()
	if len(msg) > 2*maxProblemLen {
		t.Errorf("error of %d bytes; want at most %d", len(msg), 2*maxProblemLen)
	}
	for _, want := range []string{"tenants.acme.bindings.orders.output", "bytes cut", "must be 1-63 lower-case letters"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not contain %q: %s", want, msg)
		}
	}
}

func TestClipMiddle(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		cut  bool
	}{
		{"short", "a: b", false},
		{"at the limit", strings.Repeat("x", maxProblemLen), false},
		{"over", strings.Repeat("x", maxProblemLen+1), true},
		{"multi-byte characters", strings.Repeat("é", maxProblemLen), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := clipMiddle(tc.in)
			if !tc.cut {
				if got != tc.in {
					t.Fatalf("clipMiddle changed a short text: %q", got)
				}
				return
			}
			if len(got) > maxProblemLen+40 || !strings.Contains(got, "bytes cut") {
				t.Fatalf("clipMiddle(%d bytes) = %d bytes %q", len(tc.in), len(got), got)
			}
			if !strings.HasPrefix(tc.in, strings.Split(got, "…")[0]) || !strings.HasSuffix(tc.in, got[strings.LastIndex(got, "…")+len("…"):]) {
				t.Fatalf("clipMiddle did not keep the head and the tail: %q", got)
			}
			if !utf8.ValidString(got) {
				t.Fatalf("clipMiddle split a character: %q", got)
			}
		})
	}
}
