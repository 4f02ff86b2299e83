package main

import (
	"encoding/base64"
	"unicode/utf8"

	"github.com/wqhost/wqhost/host"
)

// Body encodings of poison list --json's body_encoding field.
const (
	bodyUTF8   = "utf-8"  // body is the message's text (JSON-escaped as any string)
	bodyBase64 = "base64" // body is the message's bytes in standard base64 (not valid UTF-8)
)

// deadLetterLine is a dead letter as poison list --json prints it: host.DeadLetter with the
// body as a string whose encoding body_encoding names, text as text when it is valid UTF-8
// (encoding/json escapes its control characters, jsonTermSafe the rest a terminal acts on),
// base64 otherwise. encoding/json printed every body as base64 without saying so.
type deadLetterLine struct {
	host.DeadLetter
	Body         *string `json:"body,omitempty"` // shadows DeadLetter.Body
	BodyEncoding string  `json:"body_encoding,omitempty"`
}

func deadLetterJSON(d host.DeadLetter) deadLetterLine {
	l := deadLetterLine{DeadLetter: d}
	if d.Body == nil && d.BodyBytes > 0 {
		return l // above the listing's body limit: body_bytes only
	}
	s, enc := string(d.Body), bodyUTF8
	if !utf8.Valid(d.Body) {
		s, enc = base64.StdEncoding.EncodeToString(d.Body), bodyBase64
	}
	l.Body, l.BodyEncoding = &s, enc
	return l
}
