package azure

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

func TestEncodeDecode(t *testing.T) {
	attrs := map[string]string{"wqhost.reason": "boom <&> \"q\"", "k": "v"}
	cases := []struct {
		name  string
		enc   Encoding
		body  []byte
		attrs map[string]string
		text  string // expected message text, when exact
	}{
		{"base64 plain", EncodingBase64, []byte("hi"), nil, "aGk="},
		{"base64 empty", EncodingBase64, []byte{}, nil, ""},
		{"text plain", EncodingText, []byte("hi <b>"), nil, "hi <b>"},
		{"base64 envelope text body", EncodingBase64, []byte("hi"), attrs, ""},
		{"base64 envelope binary body", EncodingBase64, []byte{0, 0xff}, attrs, ""},
		{"text envelope", EncodingText, []byte("hi"), attrs, ""},
		{"text envelope binary body", EncodingText, []byte{0, 0xff}, attrs, ""},
		// A text body that merely looks like an envelope but is not ours stays a body.
		{"text lookalike", EncodingText, []byte(`{"wqhost.envelope":1,"nope"`), nil, `{"wqhost.envelope":1,"nope"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			text, err := encode(tc.enc, tc.body, tc.attrs)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			if tc.text != "" && text != tc.text {
				t.Fatalf("text %q, want %q", text, tc.text)
			}
			body, got, err := decode(tc.enc, text)
			if err != nil {
				t.Fatalf("decode %q: %v", text, err)
			}
			if !bytes.Equal(body, tc.body) {
				t.Fatalf("body %q, want %q", body, tc.body)
			}
			if len(got) != len(tc.attrs) {
				t.Fatalf("attributes %v, want %v", got, tc.attrs)
			}
			for k, v := range tc.attrs {
				if got[k] != v {
					t.Fatalf("attribute %s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}

func TestDecodeRejectsBadBase64(t *testing.T) {
	for _, text := range []string{"not base64!", "aGk", "aGk=x", "aGl="} {
		_, _, err := decode(EncodingBase64, text)
		var u errUndecodable
		if !errors.As(err, &u) || !strings.HasPrefix(err.Error(), "undecodable base64: ") {
			t.Errorf("decode(%q) = %v, want an undecodable base64 error", text, err)
		}
	}
}

func TestEnvelopeFallsBackToRawJSONNearLimit(t *testing.T) {
	body := bytes.Repeat([]byte("z"), 48<<10)
	text, err := encode(EncodingBase64, body, map[string]string{"wqhost.reason": "r"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(text, envelopePrefix) || len(text) > maxMessageText {
		t.Fatalf("envelope of %d bytes starting %.30q, want raw JSON within the limit", len(text), text)
	}
	got, _, err := decode(EncodingBase64, text)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("decode: %v", err)
	}
	// Below the limit the envelope is base64 like any body.
	small, _ := encode(EncodingBase64, []byte("x"), map[string]string{"a": "b"})
	if _, err := base64.StdEncoding.DecodeString(small); err != nil {
		t.Fatalf("small envelope %q is not base64", small)
	}
}

func TestCheckText(t *testing.T) {
	for _, tc := range []struct {
		in []byte
		ok bool
	}{
		{[]byte("plain\t\r\n"), true},
		{[]byte("ünï ✓"), true},
		{[]byte{0xff}, false},
		{[]byte("a\x00b"), false},
		{[]byte("a\x0bb"), false},
		{[]byte("\uffff"), false},
	} {
		if err := checkText(tc.in); (err == nil) != tc.ok {
			t.Errorf("checkText(%q) = %v, want ok=%v", tc.in, err, tc.ok)
		}
	}
}
