package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/maps"
)

// Diff lists the config keys whose values differ between a and b, two decoded configs or
// two tenants, as dotted key paths in order. It encodes both with the koanf tags decoding
// reads, so a key is named as the file writes it: blocks (admin, limits) are compared key
// by key, anything else (a list, the backends, a tenant's bindings) whole. Keys in skip,
// and the keys below them, are left out.
func Diff[T Config | Tenant](a, b T, skip ...string) []string {
	fa, fb := flatten(a), flatten(b)
	var out []string
	for k, va := range fa {
		if !skipped(k, skip) && !reflect.DeepEqual(va, fb[k]) {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, comparePaths)
	return out
}

// flatten encodes a config struct as a map of dotted key paths to values.
func flatten(v any) map[string]any {
	var m map[string]any
	dec, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{TagName: tagName, Result: &m})
	if err == nil {
		err = dec.Decode(v)
	}
	if err != nil {
		panic(fmt.Sprintf("config: encoding a %T: %v", v, err)) // Diff's types always encode
	}
	flat, _ := maps.Flatten(m, nil, ".")
	return flat
}

func skipped(key string, skip []string) bool {
	for _, s := range skip {
		if key == s || strings.HasPrefix(key, s+".") {
			return true
		}
	}
	return false
}
