package main

import (
	"encoding/json"
	"errors"
	"unicode/utf8"
)

var (
	errNotJSON   = errors.New("the body is not valid JSON")
	errNotUTF8   = errors.New("the body is not valid JSON (not UTF-8)")
	errNotObject = errors.New("the body is JSON but not an object")
)

// jsonObject returns body without surrounding whitespace if it is one JSON object, else why
// not. Invalid UTF-8 counts as invalid JSON (RFC 8259 requires UTF-8 between systems, and a
// strict consumer would refuse the whole array for it), although json.Valid lets it pass.
func jsonObject(body []byte) ([]byte, error) {
	if !json.Valid(body) {
		return nil, errNotJSON
	}
	if !utf8.Valid(body) {
		return nil, errNotUTF8
	}
	obj := trimSpace(body)
	if obj[0] != '{' { // Valid JSON is never only whitespace.
		return nil, errNotObject
	}
	return obj, nil
}

// trimSpace drops JSON's whitespace (space, tab, LF, CR) from both ends.
func trimSpace(b []byte) []byte {
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// packer builds JSON arrays of objects, each at most max bytes, and hands every full one to
// emit.
type packer struct {
	max  int
	buf  []byte // the array being built: "[" and the objects so far, without the "]"
	emit func(array []byte) error
}

// reset starts a new call's arrays, keeping the buffer.
func (p *packer) reset(limit int, emit func([]byte) error) {
	p.max, p.buf, p.emit = limit, p.buf[:0], emit
}

// fits reports whether obj fits an array of its own.
func (p *packer) fits(obj []byte) bool { return len(obj)+2 <= p.max }

// add appends obj (which fits) to the current array, first emitting that array if obj would
// take it past max.
func (p *packer) add(obj []byte) error {
	if len(p.buf) > 0 && len(p.buf)+1+len(obj)+1 > p.max {
		if err := p.flush(); err != nil {
			return err
		}
	}
	if len(p.buf) == 0 {
		p.buf = append(p.buf, '[')
	} else {
		p.buf = append(p.buf, ',')
	}
	p.buf = append(p.buf, obj...)
	return nil
}

// flush emits the current array, if it holds anything.
func (p *packer) flush() error {
	if len(p.buf) == 0 {
		return nil
	}
	p.buf = append(p.buf, ']')
	err := p.emit(p.buf)
	p.buf = p.buf[:0]
	return err
}
