package config

import (
	"testing"

	"github.com/spf13/pflag"
)

// TestLocate: where a config's host is can be read from a file that does not load (a bad
// value, even YAML that does not parse), with the environment and flags over it, and the
// defaults where the file says nothing.
func TestLocate(t *testing.T) {
	fl := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fl.String("data-dir", "", "")
	if err := fl.Parse([]string{"--data-dir", "/flag/data"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, data string
		environ    []string
		flags      *pflag.FlagSet
		want       Location
	}{
		{"a bad value elsewhere", "data_dir: /srv/wq\nadmin: {addr: \"127.0.0.1:9999\", token_env: WQ_TOKEN}\ntenants: {a: {bindings: {b: {queue: NOT_VALID, module: x}}}}\n",
			[]string{}, nil, Location{DataDir: "/srv/wq", AdminAddr: "127.0.0.1:9999", AdminTokenEnv: "WQ_TOKEN"}},
		{"not YAML", "data_dir: [unclosed\n", []string{}, nil, Location{DataDir: DefaultDataDir, AdminAddr: DefaultAdminAddr}},
		{"environment over the file", "data_dir: /srv/wq\n", []string{"WQHOST_ADMIN__ADDR=127.0.0.1:7777", "WQHOST_DATA_DIR=/env/data"}, nil,
			Location{DataDir: "/env/data", AdminAddr: "127.0.0.1:7777"}},
		{"flags over both", "data_dir: /srv/wq\n", []string{"WQHOST_DATA_DIR=/env/data"}, fl, Location{DataDir: "/flag/data", AdminAddr: DefaultAdminAddr}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Locate(LoadOptions{File: "wqhost.yaml", Data: []byte(tc.data), Environ: tc.environ, Flags: tc.flags})
			if got != tc.want {
				t.Errorf("Locate = %+v, want %+v", got, tc.want)
			}
		})
	}
}
