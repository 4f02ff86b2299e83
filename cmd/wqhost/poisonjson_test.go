package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/wqhost/wqhost/host"
)

// TestPoisonListJSONBodyEncoding: poison list --json prints a text body as text and says so
// (body_encoding utf-8), a body that is not UTF-8 as base64 (body_encoding base64), an empty
// body as "", and a body above the listing limit not at all; control characters in a text
// body stay escaped for the terminal, and each line still decodes.
func TestPoisonListJSONBodyEncoding(t *testing.T) {
	for _, tc := range []struct {
		name     string
		d        host.DeadLetter
		body     string // decoded body field; "-" for none
		encoding string
	}{
		{"text", host.DeadLetter{ID: "a", Body: []byte(`{"order":42,"name":"déjà"}`), BodyBytes: 26}, `{"order":42,"name":"déjà"}`, "utf-8"},
		{"controls", host.DeadLetter{ID: "b", Body: []byte("x\x1b[2J\x7f\u009b\u202ey"), BodyBytes: 12}, "x\x1b[2J\x7f\u009b\u202ey", "utf-8"},
		{"binary", host.DeadLetter{ID: "c", Body: []byte{0, 0xff, 0xfe}, BodyBytes: 3}, base64.StdEncoding.EncodeToString([]byte{0, 0xff, 0xfe}), "base64"},
		{"empty", host.DeadLetter{ID: "d", Body: []byte{}}, "", "utf-8"},
		{"above the listing limit", host.DeadLetter{ID: "e", BodyBytes: 50 << 20}, "-", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			c := &cli{stdout: &out, stderr: &out}
			if err := c.deadPrinter(true).add(tc.d); err != nil {
				t.Fatal(err)
			}
			line := out.String()
			for _, bad := range []string{"\x1b", "\x7f", "\u009b", "\u202e"} {
				if strings.Contains(line, bad) {
					t.Errorf("line holds %q raw: %q", bad, line)
				}
			}
			var got struct {
				Body         *string `json:"body"`
				BodyEncoding string  `json:"body_encoding"`
				BodyBytes    int64   `json:"body_bytes"`
			}
			if err := json.Unmarshal([]byte(line), &got); err != nil {
				t.Fatalf("line %q: %v", line, err)
			}
			switch {
			case tc.body == "-" && got.Body != nil:
				t.Errorf("body %q printed, want none (body_bytes %d only)", *got.Body, got.BodyBytes)
			case tc.body != "-" && (got.Body == nil || *got.Body != tc.body):
				t.Errorf("body %v, want %q in line %s", got.Body, tc.body, line)
			}
			if got.BodyEncoding != tc.encoding {
				t.Errorf("body_encoding %q, want %q", got.BodyEncoding, tc.encoding)
			}
		})
	}
}
