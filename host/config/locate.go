package config

import (
	"os"
	"reflect"

	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/posflag"
	"github.com/knadh/koanf/v2"
	"github.com/spf13/pflag"
)

// Location is where a config's host can be found: its data directory (host.json) and admin
// API, which is all the CLI needs to ask a running host about itself.
type Location struct {
	DataDir       string
	AdminAddr     string
	AdminTokenEnv string
}

// Locate reads only data_dir, admin.addr and admin.token_env from the sources Load merges
// (the file, WQHOST_ variables, flags), without validating anything else: a config file
// that fails to load (the very moment an operator asks the host why its reload failed)
// still says where its host is. Keys the file does not give, or a file that is not even
// YAML, leave the defaults, overridden by the environment and flags as Load would.
func Locate(opts LoadOptions) Location {
	k := koanf.New(".")
	data := opts.Data
	if opts.File == "" {
		data = defaultYAML
	}
	_ = loadYAML(k, data) // not YAML: the defaults, the environment and the flags
	environ := opts.Environ
	if environ == nil {
		environ = os.Environ()
	}
	toKey := envKey(keysOf(reflect.TypeFor[Config]()))
	_ = k.Load(env.Provider(".", env.Opt{
		Prefix:        EnvPrefix,
		EnvironFunc:   func() []string { return environ },
		TransformFunc: toKey,
	}), nil)
	if opts.Flags != nil {
		_ = k.Load(posflag.ProviderWithFlag(opts.Flags, ".", nil, func(f *pflag.Flag) (string, any) {
			key, ok := FlagKeys[f.Name]
			if !ok || !f.Changed {
				return "", nil
			}
			return key, f.Value.String()
		}), nil)
	}
	loc := Location{DataDir: DefaultDataDir, AdminAddr: DefaultAdminAddr}
	if s, ok := k.Get("data_dir").(string); ok && s != "" {
		loc.DataDir = s
	}
	if s, ok := k.Get("admin.addr").(string); ok && s != "" {
		loc.AdminAddr = s
	}
	if s, ok := k.Get("admin.token_env").(string); ok {
		loc.AdminTokenEnv = s
	}
	return loc
}
