package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"time"
)

// decodeJSON decodes one JSON value of a request body into v: unknown fields and anything
// after the value are refused, and a value of the wrong type is named in the JSON's terms
// (encoding/json's own message names Go types such as "Go struct field sendRequest.messages").
// An empty body is io.EOF, unwrapped, for the callers that accept one.
func decodeJSON(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		var pe *time.ParseError
		switch {
		case errors.Is(err, io.EOF):
			return err
		case errors.As(err, &te):
			field := te.Field
			if field == "" {
				field = "the body"
			}
			return fmt.Errorf("%s: got a JSON %s, want %s", field, te.Value, jsonKind(te.Type))
		case errors.As(err, &pe):
			return fmt.Errorf("time %.40q: want an RFC 3339 time such as 2026-11-25T22:00:00Z", pe.Value)
		}
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("more after the JSON value: send one object")
	}
	return nil
}

// jsonKind names the JSON value a Go type decodes from.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "another value"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return jsonKind(t.Elem())
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "base64 text"
		}
		return "a list"
	case reflect.Array:
		return "a list"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer in range"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "another value"
}
