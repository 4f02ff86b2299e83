package config

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/posflag"
	"github.com/knadh/koanf/v2"
	"github.com/spf13/pflag"
	yamlv3 "go.yaml.in/yaml/v3"
)

// defaultYAML is the embedded default configuration: the local backend under data_dir and
// one binding "billing" (queue transactions -> output priced) running builtin:billing-go.
//
//go:embed default.yaml
var defaultYAML []byte

// EnvPrefix starts every environment override.
const EnvPrefix = "WQHOST_"

// FlagKeys maps the command-line flags Load understands to their config keys. Other flags of
// the set are ignored; a flag overrides only when set on the command line.
var FlagKeys = map[string]string{
	"data-dir":   "data_dir",
	"admin":      "admin.addr",
	"log-level":  "log.level",
	"log-format": "log.format",
}

// LoadOptions say where a configuration comes from. host/config reads no files: the
// caller reads the config file (host/source.LoadConfig does) and passes its bytes.
type LoadOptions struct {
	// File names the config file Data was read from: kept as Config.File (a reload reads it
	// again) and named in errors. Empty uses the embedded default (default.yaml).
	File string
	// Data is File's content; it must be set when File is.
	Data []byte
	// BaseDir is the directory relative module and plugin paths resolve against: File's
	// directory, or the working directory for the embedded default. Empty leaves them
	// relative to the working directory at the time they are used.
	BaseDir string
	// Environ lists "KEY=value" pairs to read WQHOST_… overrides from; nil means os.Environ().
	// Use an empty non-nil slice to ignore the environment.
	Environ []string
	// Flags, when set, override keys as FlagKeys says, for flags set on the command line.
	Flags *pflag.FlagSet
	// Checks run after validation; their problems join the same report (see Check).
	Checks []Check
}

// Check is a further check of a decoded config, one error per problem, each naming its key
// path. It runs even when the config has other problems (keys that did not decode keep their
// defaults, and its findings on them are left out), so one report lists every problem:
// host/source checks modules and plugins this way, the file system being its business.
type Check func(*Config) []error

// Load merges, decodes and validates a configuration. The error joins one error per problem
// (errors.Join), each naming the key path, or the file, and the reason.
func Load(opts LoadOptions) (*Config, error) {
	k := koanf.New(".")
	file, data := opts.File, opts.Data
	if file == "" {
		data = defaultYAML
	} else if data == nil {
		// A caller that forgot to read the file must not get the defaults of an empty one.
		return nil, fmt.Errorf("config: %s: LoadOptions.Data not set (host/source.LoadConfig reads the file)", file)
	}
	if err := loadYAML(k, data); err != nil {
		return nil, fmt.Errorf("config: %s: %w", nameOf(file), err)
	}
	environ := opts.Environ
	if environ == nil {
		environ = os.Environ()
	}
	// from records the keys set outside the file, so a problem with one names its source:
	// the file does not hold the value the error quotes.
	from := map[string]string{}
	toKey := envKey(keysOf(reflect.TypeFor[Config]()))
	envp := env.Provider(".", env.Opt{
		Prefix:      EnvPrefix,
		EnvironFunc: func() []string { return environ },
		TransformFunc: func(k, v string) (string, any) {
			key, val := toKey(k, v)
			if key != "" {
				from[key] = "environment variable " + k
			}
			return key, val
		},
	})
	if err := k.Load(envp, nil); err != nil {
		return nil, fmt.Errorf("config: environment: %w", err)
	}
	if opts.Flags != nil {
		fp := posflag.ProviderWithFlag(opts.Flags, ".", nil, func(f *pflag.Flag) (string, any) {
			key, ok := FlagKeys[f.Name]
			if !ok || !f.Changed {
				return "", nil
			}
			from[key] = "flag --" + f.Name
			return key, f.Value.String()
		})
		if err := k.Load(fp, nil); err != nil {
			return nil, fmt.Errorf("config: flags: %w", err)
		}
	}
	cfg, err := build(k, opts.BaseDir, opts.Checks)
	if err != nil {
		var ce *Error
		if errors.As(err, &ce) {
			ce.File, ce.From = file, from
		}
		return nil, err
	}
	cfg.File = file
	return cfg, nil
}

// Parse decodes and validates one YAML document with no environment or flags, then runs
// checks (see Check); relative paths resolve against baseDir.
func Parse(data []byte, baseDir string, checks ...Check) (*Config, error) {
	k := koanf.New(".")
	if err := loadYAML(k, data); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return build(k, baseDir, checks)
}

// Error is an invalid configuration: one problem per bad key, each naming its key path.
type Error struct {
	// File is the config file the problems were found in (LoadOptions.File), named in the
	// message so a user with several configs knows which to edit; empty for the embedded
	// default and for Parse.
	File     string
	Problems []error
	// From maps a key set outside the file to where it was set ("environment variable
	// WQHOST_…", "flag --data-dir"); a problem with that key says so.
	From map[string]string
}

// Error lists every problem, one per line.
// maxProblemLen bounds one problem's text: a problem quotes the offending value, and a
// hostile or mistaken config may hold a megabyte in one key.
const maxProblemLen = 512

// clipMiddle shortens a long problem in the middle, where the quoted value is, keeping the
// key path at the start and the reason at the end.
func clipMiddle(s string) string {
	if len(s) <= maxProblemLen {
		return s
	}
	keep := maxProblemLen / 2
	head, tail := s[:keep], s[len(s)-keep:]
	for !utf8.ValidString(head) && len(head) > 0 { // do not split a character
		head = head[:len(head)-1]
	}
	for !utf8.ValidString(tail) && len(tail) > 0 {
		tail = tail[1:]
	}
	return fmt.Sprintf("%s…(%d bytes cut)…%s", head, len(s)-len(head)-len(tail), tail)
}

func (e *Error) Error() string {
	var sb strings.Builder
	sb.WriteString("invalid config")
	if e.File != "" {
		sb.WriteString(" ")
		sb.WriteString(clipMiddle(e.File))
	}
	if len(e.Problems) == 1 {
		sb.WriteString(": ")
		sb.WriteString(e.problem(e.Problems[0]))
		return sb.String()
	}
	fmt.Fprintf(&sb, " (%d problems):", len(e.Problems))
	for _, p := range e.Problems {
		sb.WriteString("\n  ")
		sb.WriteString(e.problem(p))
	}
	return sb.String()
}

// problem is one problem's text, clipped, naming where its key was set when not in the file.
func (e *Error) problem(p error) string {
	text := clipMiddle(p.Error())
	key, _, ok := strings.Cut(p.Error(), ": ")
	if src, set := e.From[key]; ok && set {
		text += " (set by " + src + ")"
	}
	return text
}

// Unwrap returns the problems, so errors.Is and errors.As see each.
func (e *Error) Unwrap() []error { return e.Problems }

type rawBytes []byte

func (r rawBytes) ReadBytes() ([]byte, error)    { return r, nil }
func (r rawBytes) Read() (map[string]any, error) { return nil, errors.New("not supported") }

func loadYAML(k *koanf.Koanf, data []byte) (err error) {
	defer func() {
		// A parser panic on hostile input must be a config error, not a crash.
		if r := recover(); r != nil {
			err = fmt.Errorf("invalid YAML: %v", r)
		}
	}()
	if err := k.Load(rawBytes(data), yaml.Parser()); err != nil {
		if kind := topLevelKind(data); kind != "" {
			return fmt.Errorf("invalid YAML: the top level must be a mapping of keys (tenants:, admin:, ...), got %s", kind)
		}
		return fmt.Errorf("invalid YAML: %w", err)
	}
	return nil
}

// topLevelKind names what a document that parses holds at its top level when that is not
// a mapping (a bare word, a list), or returns "": the parser's own message for that case
// names Go types ("cannot unmarshal !!str into map[string]interface {}").
func topLevelKind(data []byte) string {
	var doc yamlv3.Node
	if yamlv3.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 {
		return ""
	}
	n := doc.Content[0]
	switch n.Kind {
	case yamlv3.ScalarNode:
		return fmt.Sprintf("the value %q at line %d", clipMiddle(n.Value), n.Line)
	case yamlv3.SequenceNode:
		return fmt.Sprintf("a list at line %d", n.Line)
	case yamlv3.AliasNode:
		return fmt.Sprintf("an alias at line %d", n.Line)
	}
	return ""
}

func nameOf(file string) string {
	if file == "" {
		return "embedded default"
	}
	return file
}

// envKey returns the transform of environment variables to config keys: it maps
// WQHOST_TENANTS__ACME__BATCH_SIZE to tenants.acme.batch_size. A variable whose first part
// is none of the top-level keys (WQHOST_ADMIN_TOKEN, a secret a *_env key points at) is not
// an override and is ignored; below a known top-level key, every part is checked.
func envKey(topLevel []string) func(k, v string) (string, any) {
	return func(k, v string) (string, any) {
		k = strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(k, EnvPrefix)), "__", ".")
		top, _, _ := strings.Cut(k, ".")
		if !slices.Contains(topLevel, top) {
			return "", nil
		}
		return k, v
	}
}

func build(k *koanf.Koanf, base string, checks []Check) (*Config, error) {
	if err := checkSize(k); err != nil {
		return nil, err
	}
	cfg, failed := decode(k)
	// Validation runs even when some keys did not decode (they keep their defaults), so one
	// report lists every problem; its findings on or around a key that did not decode are
	// left out, being the decoding problem seen again.
	cfg.BaseDir = base
	problems := problemsErr(failed)
	found := cfg.validate()
	for _, check := range checks {
		found = append(found, check(&cfg)...)
	}
	for _, err := range found {
		if !nearFailed(err.Error(), failed) {
			problems = append(problems, err)
		}
	}
	if len(problems) > 0 {
		return nil, &Error{Problems: problems}
	}
	return &cfg, nil
}

// checkSize refuses a config with more bindings than max_bindings before decoding it: a
// config of 162,000 bindings fails at once with the two numbers instead of after a decode
// of every binding (seconds, and far more under the race detector). A max_bindings that is
// not a valid count is left to decode and validate to report.
func checkSize(k *koanf.Koanf) error {
	limit := DefaultMaxBindings
	if v := k.Get("max_bindings"); v != nil {
		n, ok := v.(int)
		if !ok || n < 1 || n > MaxBindingsCap {
			return nil
		}
		limit = n
	}
	tenants, _ := k.Get("tenants").(map[string]any)
	count := 0
	for _, t := range tenants {
		if tm, ok := t.(map[string]any); ok {
			if bs, ok := tm["bindings"].(map[string]any); ok {
				count += len(bs)
			}
		}
	}
	if count <= limit {
		return nil
	}
	return &Error{Problems: []error{tooManyBindings(count, limit)}}
}

// nearFailed reports whether a problem's key path (its text before ": ") is a key that did
// not decode, inside one, or encloses one.
func nearFailed(text string, failed []problem) bool {
	key, _, _ := strings.Cut(text, ": ")
	for _, p := range failed {
		if f := p.path; key == f || strings.HasPrefix(key, f+".") || strings.HasPrefix(f, key+".") || f == "" {
			return true
		}
	}
	return false
}
