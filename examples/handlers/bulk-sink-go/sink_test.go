package main

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestJSONObject(t *testing.T) {
	tests := []struct {
		body    string
		want    string
		wantErr error
	}{
		{`{"a":1}`, `{"a":1}`, nil},
		{" \t\r\n{\"a\":[1,{\"b\":null}]} \n", `{"a":[1,{"b":null}]}`, nil},
		{`{}`, `{}`, nil},
		{`{"s":"\u00e9\n"}`, `{"s":"\u00e9\n"}`, nil},
		{"", "", errNotJSON},
		{"   ", "", errNotJSON},
		{`{"a":1`, "", errNotJSON},
		{`{"a":1}{"b":2}`, "", errNotJSON},
		{`{'a':1}`, "", errNotJSON},
		{`{"a":01}`, "", errNotJSON},
		{"{\"a\":\"\x01\"}", "", errNotJSON},
		{"{\"a\":\"\xff\"}", "", errNotUTF8},
		{`[{"a":1}]`, "", errNotObject},
		{`"text"`, "", errNotObject},
		{`42`, "", errNotObject},
		{`null`, "", errNotObject},
	}
	for _, tc := range tests {
		got, err := jsonObject([]byte(tc.body))
		if string(got) != tc.want || !errors.Is(err, tc.wantErr) {
			t.Errorf("jsonObject(%q) = %q, %v; want %q, %v", tc.body, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestPacker(t *testing.T) {
	obj := func(n int) string { return `{"s":"` + strings.Repeat("x", n-8) + `"}` } // n bytes
	tests := []struct {
		name string
		max  int
		objs []string
		want []string
	}{
		{"none", 100, nil, nil},
		{"one", 100, []string{`{"a":1}`}, []string{`[{"a":1}]`}},
		{"several in one array", 100, []string{`{"a":1}`, `{}`, `{"b":2}`}, []string{`[{"a":1},{},{"b":2}]`}},
		// [ + 10 + , + 10 + ] = 23 bytes: exactly max, then the third starts a new array.
		{"split at max", 23, []string{obj(10), obj(10), obj(10)}, []string{"[" + obj(10) + "," + obj(10) + "]", "[" + obj(10) + "]"}},
		{"one byte over splits", 22, []string{obj(10), obj(10)}, []string{"[" + obj(10) + "]", "[" + obj(10) + "]"}},
		{"an object filling an array alone", 12, []string{obj(10), obj(10)}, []string{"[" + obj(10) + "]", "[" + obj(10) + "]"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			var p packer
			p.reset(tc.max, func(a []byte) error { got = append(got, string(a)); return nil })
			for _, o := range tc.objs {
				if !p.fits([]byte(o)) {
					t.Fatalf("%s does not fit max %d", o, tc.max)
				}
				if err := p.add([]byte(o)); err != nil {
					t.Fatal(err)
				}
			}
			if err := p.flush(); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("arrays %q, want %q", got, tc.want)
			}
			for _, a := range got {
				if len(a) > tc.max {
					t.Fatalf("array of %d bytes, over max %d", len(a), tc.max)
				}
			}
		})
	}
	var p packer
	p.reset(11, nil)
	if p.fits([]byte(obj(10))) {
		t.Error("a 10-byte object fits an 11-byte array")
	}
}

func TestPackerEmitError(t *testing.T) {
	boom := errors.New("boom")
	var p packer
	p.reset(12, func([]byte) error { return boom })
	if err := p.add([]byte(`{"s":"xy"}`)); err != nil {
		t.Fatal(err)
	}
	if err := p.add([]byte(`{"s":"xy"}`)); !errors.Is(err, boom) {
		t.Fatalf("add that flushes = %v, want the emit error", err)
	}
}
