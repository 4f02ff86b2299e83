package config

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/v2"
)

// tagName is the struct tag naming each field's config key, for decoding and for Diff.
const tagName = "koanf"

var (
	durationType = reflect.TypeFor[time.Duration]()
	byteSizeType = reflect.TypeFor[ByteSize]()
)

// problem is one key that did not decode.
type problem struct{ path, msg string }

func (p problem) err() error {
	if p.path == "" {
		return errors.New(p.msg)
	}
	return fmt.Errorf("%s: %s", p.path, p.msg)
}

// nothing stands for a YAML null below a mapping or a list. mapstructure leaves a nil
// value alone without calling the hook, so a missing value would silently keep its default;
// this one reaches the hook, which says where the value is missing.
type nothing struct{}

// decode unmarshals the merged configuration in k onto the defaults with koanf's
// unmarshal: mapstructure walks the koanf tags, and the hook (decoding.hook) converts and
// checks each value on the way. It returns one problem per key that did not decode, in key
// order.
func decode(k *koanf.Koanf) (Config, []problem) {
	cfg := defaultConfig()
	strict := &decoding{keys: map[reflect.Type]structKeys{}, unknown: map[uintptr]unknownKeys{}}
	err := strict.unmarshal(k, &cfg)
	if err == nil && len(strict.unknown) == 0 {
		return cfg, nil
	}
	strict.collect(err)
	strict.locateUnknown("", strict.root)
	slices.SortStableFunc(strict.problems, func(a, b problem) int { return comparePaths(a.path, b.path) })
	if err != nil {
		// mapstructure leaves out a map element (a tenant, a binding) with any value that
		// did not decode, and validation and checks must still see it, so that one report
		// lists every problem: decode again, each such value keeping its default.
		cfg = defaultConfig()
		lenient := &decoding{lenient: true, keys: strict.keys}
		_ = lenient.unmarshal(k, &cfg) // nothing fails: the hook passes over what does not decode
	}
	return cfg, strict.problems
}

// decoding is one unmarshal of a merged configuration.
type decoding struct {
	// lenient passes over a value that does not decode (it keeps its default) instead of
	// failing it.
	lenient bool
	// root is the merged map as mapstructure decodes it: the hook's first input.
	root any
	// keys caches the keys of each struct type met.
	keys map[reflect.Type]structKeys
	// unknown holds the unknown keys of each mapping that had some, by the mapping's
	// identity: the hook does not know where it is, locateUnknown finds it in root.
	unknown  map[uintptr]unknownKeys
	problems []problem
}

type structKeys struct {
	set  map[string]bool
	list string // sorted, for "known keys here"
}

type unknownKeys struct {
	keys  []string
	known string
}

func (d *decoding) unmarshal(k *koanf.Koanf, cfg *Config) error {
	return k.UnmarshalWithConf("", cfg, koanf.UnmarshalConf{Tag: tagName, DecoderConfig: &mapstructure.DecoderConfig{
		DecodeHook: mapstructure.DecodeHookFuncValue(d.hook),
		// Keys are exact: "Batch_Size" is an unknown key, not batch_size.
		MatchName: func(key, field string) bool { return key == field },
	}})
}

// hook converts raw, mapstructure's next input, to what the target to takes, or fails it
// with a message naming what was expected. It is called for every value, the whole merged
// map first.
func (d *decoding) hook(from, to reflect.Value) (any, error) {
	raw := from.Interface()
	if d.root == nil {
		d.root = raw
	}
	v, msg := d.convert(raw, to)
	switch {
	case msg == "":
		return v, nil
	case d.lenient:
		return nil, nil // mapstructure leaves the target as it is
	}
	return nil, errors.New(msg)
}

// durationSyntax matches what time.ParseDuration reads, so a duration it refuses anyway is
// one too large for time.Duration ("999999999h"), not a typo.
var durationSyntax = regexp.MustCompile(`^[-+]?([0-9]*(\.[0-9]*)?(ns|us|µs|μs|ms|s|m|h))+$`)

func (d *decoding) convert(raw any, to reflect.Value) (any, string) {
	switch to.Type() {
	case durationType:
		if s, ok := raw.(string); ok {
			dur, err := time.ParseDuration(strings.TrimSpace(s))
			if err == nil {
				return dur, ""
			}
			if durationSyntax.MatchString(strings.TrimSpace(s)) {
				return nil, fmt.Sprintf("%s is out of range (a duration holds at most %s)", describe(raw), time.Duration(math.MaxInt64))
			}
		} else if n, ok := integer(raw); ok && n == 0 {
			return time.Duration(0), ""
		}
		return nil, expected(`a duration such as "30s" or "100ms"`, raw)
	case byteSizeType:
		if s, ok := raw.(string); ok {
			n, err := ParseByteSize(s)
			if err != nil {
				return nil, err.Error()
			}
			return n, ""
		}
		if n, ok := integer(raw); ok && n >= 0 {
			return ByteSize(n), ""
		}
		return nil, expected(`a size such as "64MiB"`, raw)
	}
	switch to.Kind() {
	case reflect.Struct:
		if def, ok := elementDefaults(to.Type()); ok && to.CanSet() {
			// A fresh map element: keys the file leaves out keep their documented defaults.
			to.Set(def)
		}
		m, ok := raw.(map[string]any)
		if !ok {
			return nil, expected("a mapping", raw)
		}
		return d.known(m, to.Type()), ""
	case reflect.Map:
		switch x := raw.(type) {
		case nothing:
			return nil, ""
		case map[string]any:
			if to.Type().Elem().Kind() == reflect.String {
				return stringValues(x), ""
			}
			return markNulls(x), ""
		}
		return nil, expected("a mapping", raw)
	case reflect.Slice:
		switch x := raw.(type) {
		case nothing:
			return nil, ""
		case []any:
			return markNullItems(x), ""
		case string:
			// Environment variables give lists as comma-separated strings.
			if to.Type().Elem().Kind() == reflect.String {
				return splitList(x), ""
			}
		}
		return nil, expected("a list", raw)
	case reflect.String:
		if s, ok := raw.(string); ok {
			return s, ""
		}
		return nil, expected("a string", raw)
	case reflect.Bool:
		switch x := raw.(type) {
		case bool:
			return x, ""
		case string:
			if b, err := strconv.ParseBool(x); err == nil {
				return b, ""
			}
		}
		return nil, expected("true or false", raw)
	case reflect.Int, reflect.Int64:
		n, ok := integer(raw)
		if !ok {
			return nil, expected("an integer", raw)
		}
		if to.OverflowInt(n) {
			return nil, fmt.Sprintf("%d is out of range", n)
		}
		return n, ""
	}
	return raw, ""
}

func expected(what string, raw any) string { return "expected " + what + ", got " + describe(raw) }

// elementDefaults returns the documented defaults of a map element type that has them.
func elementDefaults(t reflect.Type) (reflect.Value, bool) {
	switch t {
	case reflect.TypeFor[Tenant]():
		return reflect.ValueOf(defaultTenant()), true
	case reflect.TypeFor[Binding]():
		return reflect.ValueOf(defaultBinding()), true
	case reflect.TypeFor[Backend]():
		return reflect.ValueOf(defaultBackend()), true
	}
	return reflect.Value{}, false
}

// known returns the keys of m that struct type t takes, nulls marked, and notes the others
// as unknown. Unknown keys never reach mapstructure, which would take "-" for the fields
// tagged "-".
func (d *decoding) known(m map[string]any, t reflect.Type) map[string]any {
	keys, ok := d.keys[t]
	if !ok {
		list := keysOf(t)
		keys = structKeys{set: make(map[string]bool, len(list)), list: strings.Join(list, ", ")}
		for _, k := range list {
			keys.set[k] = true
		}
		d.keys[t] = keys
	}
	var unknown []string
	clean := true
	for k, v := range m {
		if !keys.set[k] {
			unknown = append(unknown, k)
		}
		clean = clean && v != nil
	}
	if !d.lenient && len(unknown) > 0 {
		slices.Sort(unknown)
		d.unknown[reflect.ValueOf(m).Pointer()] = unknownKeys{keys: unknown, known: keys.list}
	}
	if clean && len(unknown) == 0 {
		return m
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		if keys.set[k] {
			out[k] = nullable(v)
		}
	}
	return out
}

// keysOf returns the keys struct type t takes, as mapstructure matches them: the koanf tags
// of its fields and of its ",squash" embeddings. Fields tagged "-" are no config keys.
func keysOf(t reflect.Type) []string {
	var md mapstructure.Metadata
	dec, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{TagName: tagName, Metadata: &md, Result: reflect.New(t).Interface()})
	if err == nil {
		err = dec.Decode(map[string]any{}) // an empty mapping leaves every key unset
	}
	if err != nil {
		panic(fmt.Sprintf("config: listing the keys of %s: %v", t, err)) // t is one of the config's structs
	}
	keys := slices.DeleteFunc(md.Unset, func(k string) bool { return k == "-" })
	slices.Sort(keys)
	return keys
}

func nullable(v any) any {
	if v == nil {
		return nothing{}
	}
	return v
}

// markNulls returns m with its nulls marked (see nothing).
func markNulls(m map[string]any) map[string]any {
	for _, v := range m {
		if v == nil {
			out := make(map[string]any, len(m))
			for k, v := range m {
				out[k] = nullable(v)
			}
			return out
		}
	}
	return m
}

// markNullItems returns items with their nulls marked (see nothing).
func markNullItems(items []any) []any {
	if !slices.Contains(items, nil) {
		return items
	}
	out := make([]any, len(items))
	for i, v := range items {
		out[i] = nullable(v)
	}
	return out
}

// stringValues gives a free-form string map (guest config, plugin env) its scalars as
// they are written; anything else is left for the hook to refuse.
func stringValues(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		switch x := v.(type) {
		case bool, int, int64, uint64, float64:
			out[k] = fmt.Sprint(x)
		default:
			out[k] = nullable(v)
		}
	}
	return out
}

func splitList(s string) []any {
	var items []any
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			items = append(items, item)
		}
	}
	return items
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

func describe(raw any) string {
	switch v := raw.(type) {
	case string:
		return strconv.Quote(v)
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case nothing, nil:
		return "nothing"
	}
	return fmt.Sprint(raw)
}
