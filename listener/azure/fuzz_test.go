package azure

import (
	"bytes"
	"errors"
	"maps"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzDecode feeds arbitrary message text — what any producer may put on a queue — to the
// decoder under both encodings. It must never panic; under base64 text that is neither
// base64 nor an envelope is reported as undecodable (the backend then dead-letters it), and
// text encoding accepts everything.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		"", "aGVsbG8=", "not base64!", "%%%", "YWJj=garbage", "aGVsbG8",
		`{"wqhost.envelope":1,"attributes":{"wqhost.reason":"x"},"text":"body"}`,
		`{"wqhost.envelope":1,"attributes":{},"base64":"!!!"}`,
		`{"wqhost.envelope":1,"attributes":null,"text":"a","base64":"YQ=="}`,
		`{"wqhost.envelope":2}`, `{"wqhost.envelope":1,`, "\x00\xff",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, text string, textEnc bool) {
		enc := EncodingBase64
		if textEnc {
			enc = EncodingText
		}
		body, _, err := decode(enc, text)
		if err != nil {
			var u errUndecodable
			if !errors.As(err, &u) {
				t.Fatalf("decode(%s, %q): error %v is not errUndecodable", enc, text, err)
			}
			if enc == EncodingText {
				t.Fatalf("decode(text, %q): %v; text encoding must accept any text", text, err)
			}
			if strings.HasPrefix(text, envelopePrefix) {
				t.Fatalf("decode(%q): envelope-prefixed text reported undecodable", text)
			}
			return
		}
		if enc == EncodingText && !strings.HasPrefix(text, envelopePrefix) && string(body) != text {
			t.Fatalf("decode(text, %q) = %q: plain text must come back as is", text, body)
		}
	})
}

// FuzzEnvelopeRoundTrip: whatever body and attributes the host sends (with or without an
// attribute envelope, under either encoding) come back unchanged from decode.
func FuzzEnvelopeRoundTrip(f *testing.F) {
	f.Add([]byte("hello"), "", "", false)
	f.Add([]byte{}, "wqhost.reason", "handler call: trap", false)
	f.Add([]byte{0xff, 0x00, 0xfe}, "wqhost.reason", "bad", true)
	f.Add([]byte("line\nwith\ttabs"), "k", "v\u2028", true)
	f.Add(bytes.Repeat([]byte("x"), 40<<10), "wqhost.original_id", "abc", false)
	f.Fuzz(func(t *testing.T, body []byte, key, value string, textEnc bool) {
		enc := EncodingBase64
		if textEnc {
			enc = EncodingText
		}
		var attrs map[string]string
		if key != "" {
			// JSON carries only valid UTF-8: attribute keys and values are host-made
			// (reasons, ids, timestamps); invalid bytes in them are replaced, not kept.
			if !utf8.ValidString(key) || !utf8.ValidString(value) {
				return
			}
			attrs = map[string]string{key: value}
		}
		if attrs == nil && bytes.HasPrefix(body, []byte(envelopePrefix)) {
			// Known limitation: a bare body that is itself a well-formed wqhost envelope
			// is unwrapped by decode (the wire format cannot tell the two apart).
			return
		}
		text, err := encode(enc, body, attrs)
		if err != nil {
			if enc == EncodingText && attrs == nil && checkText(body) != nil {
				return // binary bodies need base64: a clear error, nothing sent
			}
			t.Fatalf("encode(%s, %q, %v): %v", enc, body, attrs, err)
		}
		got, gotAttrs, err := decode(enc, text)
		if err != nil {
			t.Fatalf("decode(encode(%s, %q, %v)) = %v", enc, body, attrs, err)
		}
		if !bytes.Equal(got, body) {
			t.Fatalf("body %q came back as %q (encoding %s, attrs %v)", body, got, enc, attrs)
		}
		if len(attrs) > 0 && !maps.Equal(gotAttrs, attrs) || len(attrs) == 0 && len(gotAttrs) != 0 {
			t.Fatalf("attributes %v came back as %v", attrs, gotAttrs)
		}
	})
}
