package config

import (
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/go-viper/mapstructure/v2"
)

// collect adds a problem for each value mapstructure reports that did not decode: it joins
// one error per field, each naming the field.
func (d *decoding) collect(err error) {
	if err == nil {
		return
	}
	if de, ok := err.(*mapstructure.DecodeError); ok {
		d.problems = append(d.problems, problem{path: keyPath(d.root, de.Name()), msg: de.Unwrap().Error()})
		return
	}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, err := range joined.Unwrap() {
			d.collect(err)
		}
		return
	}
	if inner := errors.Unwrap(err); inner != nil {
		d.collect(inner) // "decoding failed due to the following error(s)"
		return
	}
	d.problems = append(d.problems, problem{msg: err.Error()})
}

// locateUnknown adds a problem for each unknown key the hook noted, found by walking the
// merged map from raw at path.
func (d *decoding) locateUnknown(path string, raw any) {
	switch x := raw.(type) {
	case map[string]any:
		if u, ok := d.unknown[reflect.ValueOf(x).Pointer()]; ok {
			for _, k := range u.keys {
				d.problems = append(d.problems, problem{path: join(path, k), msg: "unknown key (known keys here: " + u.known + ")"})
			}
		}
		for k, v := range x {
			d.locateUnknown(join(path, k), v)
		}
	case []any:
		for i, v := range x {
			d.locateUnknown(path+"["+strconv.Itoa(i)+"]", v)
		}
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// keyPath turns the name mapstructure gives a value (tenants[acme].bindings[orders].batch_size,
// shards[1]) into its key path as the config writes it (tenants.acme.bindings.orders.batch_size,
// shards[1]), following the name through the merged map from root: a bracket after a
// mapping holds a key, after a list an index.
func keyPath(root any, name string) string {
	path, at := "", root
	for i := 0; i < len(name); {
		switch name[i] {
		case '.':
			i++
		case '[':
			end := -1
			if m, ok := at.(map[string]any); ok {
				// The shortest bracketed key the mapping holds that ends a segment: a key
				// may itself hold ']'.
				for j := i + 1; j < len(name) && end < 0; j++ {
					if name[j] == ']' && (j+1 == len(name) || name[j+1] == '.' || name[j+1] == '[') {
						if _, ok := m[name[i+1:j]]; ok {
							end = j
						}
					}
				}
			} else if j := strings.IndexByte(name[i:], ']'); j > 0 {
				end = i + j
			}
			if end < 0 {
				return path + name[i:] // not in the merged map: as mapstructure wrote it
			}
			key := name[i+1 : end]
			switch x := at.(type) {
			case map[string]any:
				path, at = join(path, key), x[key]
			case []any:
				n, _ := strconv.Atoi(key)
				path, at = path+"["+key+"]", nil
				if n >= 0 && n < len(x) {
					at = x[n]
				}
			default:
				path += "[" + key + "]"
			}
			i = end + 1
		default:
			// A struct field: its key holds no '.' nor '['.
			j := strings.IndexAny(name[i:], ".[")
			if j < 0 {
				j = len(name) - i
			}
			key := name[i : i+j]
			m, _ := at.(map[string]any)
			path, at = join(path, key), m[key]
			i += j
		}
	}
	return path
}

// comparePaths orders key paths as the config reads: key by key, list items by index.
func comparePaths(a, b string) int {
	return slices.CompareFunc(pathParts(a), pathParts(b), func(x, y string) int {
		if strings.HasSuffix(x, "]") && strings.HasSuffix(y, "]") {
			nx, ex := strconv.Atoi(strings.TrimSuffix(x, "]"))
			ny, ey := strconv.Atoi(strings.TrimSuffix(y, "]"))
			if ex == nil && ey == nil {
				return nx - ny
			}
		}
		return strings.Compare(x, y)
	})
}

func pathParts(p string) []string {
	return strings.FieldsFunc(p, func(r rune) bool { return r == '.' || r == '[' })
}

// problemsErr formats problems as the errors of Error.
func problemsErr(ps []problem) []error {
	out := make([]error, len(ps))
	for i, p := range ps {
		out[i] = p.err()
	}
	return out
}
