package runtime

import (
	"context"
	"strings"
	"testing"
)

// tinyModule assembles a minimal wqhost/v1 module by hand: memory, wqhost_abi_v1,
// wqhost_handle, the given extra ()->() exports, and optionally an import of
// wqhost.http_status.
func tinyModule(importHTTP bool, exports ...string) []byte {
	vec := func(items ...[]byte) []byte {
		out := []byte{byte(len(items))}
		for _, it := range items {
			out = append(out, it...)
		}
		return out
	}
	name := func(s string) []byte { return append([]byte{byte(len(s))}, s...) }
	section := func(id byte, body []byte) []byte { return append([]byte{id, byte(len(body))}, body...) }
	m := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
	// Types: 0 ()->(), 1 ()->i32, 2 (i32)->i32.
	m = append(m, section(1, vec([]byte{0x60, 0, 0}, []byte{0x60, 0, 1, 0x7f}, []byte{0x60, 1, 0x7f, 1, 0x7f}))...)
	nImports := byte(0)
	if importHTTP {
		imp := append(append(name("wqhost"), name("http_status")...), 0x00, 2)
		m = append(m, section(2, vec(imp))...)
		nImports = 1
	}
	m = append(m, section(3, vec([]byte{0}, []byte{1}))...) // marker, handle
	m = append(m, section(5, vec([]byte{0, 1}))...)         // one memory of 1 page
	ex := [][]byte{
		append(name("memory"), 0x02, 0),
		append(name("wqhost_abi_v1"), 0x00, nImports),
		append(name("wqhost_handle"), 0x00, nImports+1),
	}
	for _, e := range exports {
		ex = append(ex, append(name(e), 0x00, nImports))
	}
	m = append(m, section(7, vec(ex...))...)
	m = append(m, section(10, vec([]byte{2, 0, 0x0b}, []byte{4, 0, 0x41, 0, 0x0b}))...)
	return m
}

func TestFeatureMarkers(t *testing.T) {
	e := testEngine(t)
	for _, tt := range []struct {
		name       string
		importHTTP bool
		exports    []string
		want       string // "" = loads
	}{
		{"no http", false, nil, ""},
		{"http with marker", true, []string{"wqhost_feature_http_v1"}, ""},
		{"marker without imports", false, []string{"wqhost_feature_http_v1"}, ""},
		{"http without marker", true, nil, "imports the outbound HTTP functions but does not export wqhost_feature_http_v1"},
		{"unknown feature", false, []string{"wqhost_feature_http_v2"}, "declares wqhost_feature_http_v2; this host supports wqhost_feature_http_v1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, err := e.Compile(context.Background(), tt.name+".wasm", tinyModule(tt.importHTTP, tt.exports...), ABIWqhostV1)
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got, want := m.c.usesHTTP, tt.importHTTP || len(tt.exports) > 0; got != want {
					t.Errorf("usesHTTP = %v, want %v", got, want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), tt.name+".wasm") {
				t.Errorf("error %v, want one naming the file and %q", err, tt.want)
			}
		})
	}
}
