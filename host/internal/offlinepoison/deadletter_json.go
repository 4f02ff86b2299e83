package offlinepoison

import (
	"encoding/json"
	"unicode/utf8"
)

// deadLetterFields is DeadLetter without its JSON methods.
type deadLetterFields DeadLetter

// deadLetterJSON is a DeadLetter as JSON: the body as text in "body" when it is valid UTF-8,
// else as base64 in "body_base64", as wqhost peek --json prints a message, so a reader sees
// a text body as text and knows which encoding it got from the field's name (encoding/json
// printed every body as base64 under "body", without saying so).
type deadLetterJSON struct {
	deadLetterFields
	Body       *string `json:"body,omitempty"` // shadows deadLetterFields.Body
	BodyBase64 []byte  `json:"body_base64,omitempty"`
}

// MarshalJSON writes the body as "body" (UTF-8 text, "" for an empty body) or
// "body_base64", and neither for a body above ListBodyBytes, which a listing does not read.
func (d DeadLetter) MarshalJSON() ([]byte, error) {
	w := deadLetterJSON{deadLetterFields: deadLetterFields(d)}
	switch {
	case d.Body == nil && d.BodyBytes > 0:
	case utf8.Valid(d.Body):
		s := string(d.Body)
		w.Body = &s
	default:
		w.BodyBase64 = d.Body
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (d *DeadLetter) UnmarshalJSON(b []byte) error {
	var w deadLetterJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*d = DeadLetter(w.deadLetterFields)
	switch {
	case w.Body != nil:
		d.Body = []byte(*w.Body)
	case w.BodyBase64 != nil:
		d.Body = w.BodyBase64
	}
	return nil
}
