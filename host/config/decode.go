package config

import (
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ByteSize is a size in bytes. In the config it is an integer or a string with a unit:
// "64KiB", "128MiB", "1GiB" (powers of 1024) or "64KB", "128MB", "1GB" (powers of 1000).
type ByteSize int64

// String formats the size with the largest binary unit that divides it.
func (b ByteSize) String() string {
	for _, u := range []struct {
		s string
		n int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if b != 0 && int64(b)%u.n == 0 {
			return strconv.FormatInt(int64(b)/u.n, 10) + u.s
		}
	}
	return strconv.FormatInt(int64(b), 10)
}

// MarshalText lets status and config dumps show "128MiB".
func (b ByteSize) MarshalText() ([]byte, error) { return []byte(b.String()), nil }

var byteUnits = []struct {
	s string
	n int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1},
}

// ParseByteSize parses "128MiB", "64KB", "1048576".
func ParseByteSize(s string) (ByteSize, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(t, u.s) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.s)), u.n
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("expected a size such as \"64MiB\", got %q", s)
	}
	return ByteSize(n * mult), nil
}

var (
	durationType = reflect.TypeOf(time.Duration(0))
	byteSizeType = reflect.TypeOf(ByteSize(0))
)

// decoder turns the merged koanf map into typed values, one error per bad key.
type decoder struct {
	errs   []error
	failed []string // key paths of errs, so validation can skip what did not decode
}

func (d *decoder) fail(path, format string, args ...any) {
	d.errs = append(d.errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
	d.failed = append(d.failed, path)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func describe(raw any) string {
	switch v := raw.(type) {
	case string:
		return strconv.Quote(v)
	case map[string]any, map[any]any:
		return "a mapping"
	case []any:
		return "a list"
	case nil:
		return "nothing"
	}
	return fmt.Sprint(raw)
}

// asMap accepts the map shapes YAML and koanf produce.
func asMap(raw any) (map[string]any, bool) {
	switch m := raw.(type) {
	case map[string]any:
		return m, true
	case map[any]any:
		out := make(map[string]any, len(m))
		for k, v := range m {
			out[fmt.Sprint(k)] = v
		}
		return out, true
	}
	return nil, false
}

// fieldsOf maps koanf keys to struct fields, following ",squash" embeddings.
func fieldsOf(v reflect.Value) map[string]reflect.Value {
	out := map[string]reflect.Value{}
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("koanf")
		if tag == "-" || !f.IsExported() {
			continue
		}
		if strings.HasSuffix(tag, ",squash") {
			for k, fv := range fieldsOf(v.Field(i)) {
				out[k] = fv
			}
			continue
		}
		if tag == "" {
			continue
		}
		out[tag] = v.Field(i)
	}
	return out
}

// newElem returns a fresh map element, pre-filled with the documented defaults where the
// element type has them, so that keys a file leaves out keep their defaults.
func newElem(t reflect.Type) reflect.Value {
	v := reflect.New(t).Elem()
	switch t {
	case reflect.TypeOf(Tenant{}):
		v.Set(reflect.ValueOf(defaultTenant()))
	case reflect.TypeOf(Binding{}):
		v.Set(reflect.ValueOf(defaultBinding()))
	case reflect.TypeOf(Backend{}):
		v.Set(reflect.ValueOf(defaultBackend()))
	}
	return v
}

func (d *decoder) decode(path string, raw any, v reflect.Value) {
	switch v.Type() {
	case durationType:
		d.duration(path, raw, v)
		return
	case byteSizeType:
		switch x := raw.(type) {
		case string:
			n, err := ParseByteSize(x)
			if err != nil {
				d.fail(path, "%v", err)
				return
			}
			v.SetInt(int64(n))
		default:
			n, ok := integer(raw)
			if !ok || n < 0 {
				d.fail(path, "expected a size such as \"64MiB\", got %s", describe(raw))
				return
			}
			v.SetInt(n)
		}
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		m, ok := asMap(raw)
		if !ok {
			d.fail(path, "expected a mapping, got %s", describe(raw))
			return
		}
		fields := fieldsOf(v)
		for _, k := range slices.Sorted(maps.Keys(m)) {
			f, ok := fields[k]
			if !ok {
				known := make([]string, 0, len(fields))
				for name := range fields {
					known = append(known, name)
				}
				sort.Strings(known)
				d.fail(join(path, k), "unknown key (known keys here: %s)", strings.Join(known, ", "))
				continue
			}
			d.decode(join(path, k), m[k], f)
		}
	case reflect.Map:
		if raw == nil {
			return
		}
		m, ok := asMap(raw)
		if !ok {
			d.fail(path, "expected a mapping, got %s", describe(raw))
			return
		}
		if v.IsNil() {
			v.Set(reflect.MakeMap(v.Type()))
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			e := newElem(v.Type().Elem())
			if old := v.MapIndex(reflect.ValueOf(k)); old.IsValid() {
				e.Set(old)
			}
			if v.Type().Elem().Kind() == reflect.String {
				// Free-form string maps (guest config, plugin env) take any scalar.
				s, ok := scalarString(m[k])
				if !ok {
					d.fail(join(path, k), "expected a string, got %s", describe(m[k]))
					continue
				}
				e.SetString(s)
			} else {
				d.decode(join(path, k), m[k], e)
			}
			v.SetMapIndex(reflect.ValueOf(k), e)
		}
	case reflect.Slice:
		var items []any
		switch x := raw.(type) {
		case nil:
			v.Set(reflect.Zero(v.Type()))
			return
		case []any:
			items = x
		case string:
			// Environment variables give lists as comma-separated strings.
			if v.Type().Elem().Kind() != reflect.String {
				d.fail(path, "expected a list, got %s", describe(raw))
				return
			}
			for _, s := range strings.Split(x, ",") {
				if s = strings.TrimSpace(s); s != "" {
					items = append(items, s)
				}
			}
		default:
			d.fail(path, "expected a list, got %s", describe(raw))
			return
		}
		out := reflect.MakeSlice(v.Type(), len(items), len(items))
		for i, it := range items {
			d.decode(fmt.Sprintf("%s[%d]", path, i), it, out.Index(i))
		}
		v.Set(out)
	case reflect.String:
		s, ok := raw.(string)
		if !ok {
			d.fail(path, "expected a string, got %s", describe(raw))
			return
		}
		v.SetString(s)
	case reflect.Bool:
		switch x := raw.(type) {
		case bool:
			v.SetBool(x)
		case string:
			b, err := strconv.ParseBool(x)
			if err != nil {
				d.fail(path, "expected true or false, got %s", describe(raw))
				return
			}
			v.SetBool(b)
		default:
			d.fail(path, "expected true or false, got %s", describe(raw))
		}
	case reflect.Int, reflect.Int64:
		n, ok := integer(raw)
		if !ok {
			d.fail(path, "expected an integer, got %s", describe(raw))
			return
		}
		if v.OverflowInt(n) {
			d.fail(path, "%d is out of range", n)
			return
		}
		v.SetInt(n)
	case reflect.Float64:
		switch x := raw.(type) {
		case float64:
			v.SetFloat(x)
		case int:
			v.SetFloat(float64(x))
		case int64:
			v.SetFloat(float64(x))
		case string:
			f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
			if err != nil {
				d.fail(path, "expected a number, got %s", describe(raw))
				return
			}
			v.SetFloat(f)
		default:
			d.fail(path, "expected a number, got %s", describe(raw))
		}
	default:
		d.fail(path, "unsupported config type %s", v.Type())
	}
}

func (d *decoder) duration(path string, raw any, v reflect.Value) {
	s, ok := raw.(string)
	if !ok {
		if n, isInt := integer(raw); isInt && n == 0 {
			v.SetInt(0)
			return
		}
		d.fail(path, "expected a duration such as \"30s\" or \"100ms\", got %s", describe(raw))
		return
	}
	dur, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		d.fail(path, "expected a duration such as \"30s\" or \"100ms\", got %s", describe(raw))
		return
	}
	v.SetInt(int64(dur))
}

func integer(raw any) (int64, bool) {
	switch x := raw.(type) {
	case int:
		return int64(x), true
	case int64:
		return x, true
	case uint64:
		if x > math.MaxInt64 {
			return 0, false
		}
		return int64(x), true
	case float64:
		if x != math.Trunc(x) || math.IsInf(x, 0) || math.Abs(x) > 1<<53 {
			return 0, false
		}
		return int64(x), true
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64)
		return n, err == nil
	}
	return 0, false
}

func scalarString(raw any) (string, bool) {
	switch x := raw.(type) {
	case string:
		return x, true
	case bool, int, int64, uint64, float64:
		return fmt.Sprint(x), true
	}
	return "", false
}
