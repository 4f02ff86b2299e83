package azure

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Azure messages have no properties, only text. A message with attributes (dead letters:
// reason, original id, dequeue count...) is sent as a JSON envelope in place of the body:
//
//	{"wqhost.envelope":1,"attributes":{"wqhost.reason":"..."},"text":"<body>"}
//
// with "base64":"<body, base64>" instead of "text" when the body is not valid text. The
// envelope is then encoded like any body (base64 under EncodingBase64), so a Functions app or
// the JS client reading a poison queue sees readable JSON with the body and why it failed.
// If a base64-encoded envelope would exceed Azure's 64 KiB limit it is stored as raw JSON:
// message text starting with '{' can never be base64, so it is recognised either way.
// Messages without attributes carry the bare body: interoperable with every other producer.
const envelopeVersion = 1

// envelopePrefix starts every envelope (json.Marshal keeps struct field order).
const envelopePrefix = `{"wqhost.envelope":1,`

type envelope struct {
	Version    int               `json:"wqhost.envelope"`
	Attributes map[string]string `json:"attributes"`
	Text       *string           `json:"text,omitempty"`
	Base64     *string           `json:"base64,omitempty"`
}

// encode returns the message text for body and attributes.
func encode(enc Encoding, body []byte, attrs map[string]string) (string, error) {
	if len(attrs) == 0 {
		if enc == EncodingText {
			if err := checkText(body); err != nil {
				return "", fmt.Errorf("body is not valid for Encoding %q (%v); use Encoding %q for binary bodies", EncodingText, err, EncodingBase64)
			}
			return string(body), nil
		}
		return base64.StdEncoding.EncodeToString(body), nil
	}
	env := envelope{Version: envelopeVersion, Attributes: attrs}
	if checkText(body) == nil {
		s := string(body)
		env.Text = &s
	} else {
		s := base64.StdEncoding.EncodeToString(body)
		env.Base64 = &s
	}
	var buf bytes.Buffer
	je := json.NewEncoder(&buf)
	je.SetEscapeHTML(false)
	if err := je.Encode(env); err != nil {
		return "", fmt.Errorf("encode attributes envelope: %w", err)
	}
	raw := strings.TrimSuffix(buf.String(), "\n")
	if enc == EncodingText {
		return raw, nil
	}
	if b64 := base64.StdEncoding.EncodeToString([]byte(raw)); len(b64) <= maxMessageText {
		return b64, nil
	}
	return raw, nil
}

// errUndecodable reports message text that is not valid under the queue's encoding.
type errUndecodable struct{ err error }

func (e errUndecodable) Error() string { return "undecodable base64: " + e.err.Error() }

// decode returns the body and attributes carried by message text.
func decode(enc Encoding, text string) (body []byte, attrs map[string]string, err error) {
	payload := []byte(text)
	if enc != EncodingText && !strings.HasPrefix(text, envelopePrefix) {
		payload, err = base64.StdEncoding.Strict().DecodeString(text)
		if err != nil {
			return nil, nil, errUndecodable{err}
		}
	}
	if bytes.HasPrefix(payload, []byte(envelopePrefix)) {
		var env envelope
		if json.Unmarshal(payload, &env) == nil && env.Version == envelopeVersion && (env.Text == nil) != (env.Base64 == nil) {
			if env.Text != nil {
				return []byte(*env.Text), env.Attributes, nil
			}
			if b, err := base64.StdEncoding.DecodeString(*env.Base64); err == nil {
				return b, env.Attributes, nil
			}
		}
		// Not one of ours after all: deliver the payload as the body.
	}
	return payload, nil, nil
}

// checkText accepts bodies Azure can carry as XML text: valid UTF-8 without the control
// characters XML 1.0 forbids.
func checkText(b []byte) error {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return fmt.Errorf("invalid UTF-8 at byte %d", i)
		}
		if (r < 0x20 && r != '\t' && r != '\n' && r != '\r') || r == 0xFFFE || r == 0xFFFF {
			return fmt.Errorf("character %U at byte %d is not allowed in XML", r, i)
		}
		i += n
	}
	return nil
}
