package config

import (
	"strings"
	"testing"
)

func TestOrderedBindingNeedsAFIFOBackend(t *testing.T) {
	backends := "backends:\n  cloud: {type: azure, connection_string_env: AZ}\n  mem: {type: memory}\n  js: {type: nats, nats: {urls: [nats://x:4222]}}\n"
	cases := []struct {
		name, yaml string
		want       string // "" = accepted
	}{
		{"local backend", binding("        ordered: true\n"), ""},
		{"nats backend", backends + binding("        ordered: true\n        backend: js\n"), ""},
		{"azure backend", backends + binding("        ordered: true\n        backend: cloud\n"),
			`tenants.acme.bindings.orders.ordered: backend "cloud" is of type azure: Azure Queue Storage does not deliver in FIFO order; ordered mode needs a local or nats backend`},
		{"memory backend", backends + binding("        ordered: true\n        backend: mem\n"),
			`tenants.acme.bindings.orders.ordered: backend "mem" is of type memory: it has no ordered receive`},
		{"sharded queue", binding("        ordered: true\n        shards: [s1, s2]\n"),
			"tenants.acme.bindings.orders.ordered: a sharded queue has no FIFO order across its shards"},
		{"at most once", binding("        ordered: true\n        at_most_once: true\n"),
			"tenants.acme.bindings.orders.ordered: at_most_once settles messages on receive"},
		{"not a bool", binding("        ordered: yes please\n"),
			`tenants.acme.bindings.orders.ordered: expected true or false`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.yaml), t.TempDir())
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if !c.Tenants["acme"].Bindings["orders"].Ordered {
					t.Fatal("ordered: true not decoded")
				}
				return
			}
			if err == nil {
				t.Fatal("config accepted")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error does not contain %q:\n%v", tc.want, err)
			}
		})
	}
}
