package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// densityYAML is a config of n bindings of a builtin module over n/100 tenants (at least
// one), each binding with its own queue and output: BenchmarkDensity's shape.
func densityYAML(n int) []byte {
	tenants := max(1, n/100)
	var y strings.Builder
	fmt.Fprintf(&y, "data_dir: /tmp/wq\nadmin: {addr: \"off\"}\nmax_bindings: %d\ntenants:\n", max(n, DefaultMaxBindings))
	for t := range tenants {
		fmt.Fprintf(&y, "  t%d:\n    bindings:\n", t)
		for i := t; i < n; i += tenants {
			fmt.Fprintf(&y, "      b%d: {queue: q%d, output: o%d, module: 'builtin:echo-tinygo', push: true}\n", i, i, i)
		}
	}
	return []byte(y.String())
}

// TestParseTenThousandBindings parses and validates a 10,000-binding config and logs how
// long it took (no assertion on time: the machine is shared). Every binding must survive.
func TestParseTenThousandBindings(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 bindings")
	}
	data := densityYAML(10000)
	start := time.Now()
	c, err := Parse(data, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("config.Parse of 10000 bindings (%d KiB of YAML): %s", len(data)>>10, time.Since(start).Round(time.Millisecond))
	n := 0
	for _, tc := range c.Tenants {
		n += len(tc.Bindings)
	}
	if n != 10000 {
		t.Fatalf("%d bindings parsed, want 10000", n)
	}
}

// BenchmarkParseBindings measures config.Parse (YAML, decoding and validation) by size:
// it should grow linearly with the bindings.
// Run: go test -run '^$' -bench ParseBindings ./host/config/
func BenchmarkParseBindings(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		data := densityYAML(n)
		b.Run(fmt.Sprint("n=", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := Parse(data, b.TempDir()); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(n), "µs/binding")
		})
	}
}

// TestMaxBindings: max_bindings caps the bindings of all tenants together, at load, naming
// the key and both numbers; its own value must be in range.
func TestMaxBindings(t *testing.T) {
	cfg := func(top string, tenants, per int) []byte {
		var y strings.Builder
		y.WriteString("data_dir: /tmp/wq\nadmin: {addr: \"off\"}\n" + top + "tenants:\n")
		for i := range tenants {
			fmt.Fprintf(&y, "  t%d:\n    bindings:\n", i)
			for j := range per {
				fmt.Fprintf(&y, "      b%d: {queue: q%d, module: 'builtin:echo-tinygo'}\n", j, j)
			}
		}
		return []byte(y.String())
	}
	for _, tc := range []struct {
		name          string
		top           string
		tenants, per  int
		want          string // "" = loads
		wantBindings  int
		wantOnlyError bool // the size problem alone: no check per binding ran
	}{
		{"default allows 20000", "", 200, 100, "", 20000, false},
		{"default refuses 20001", "", 1, 20001, "max_bindings: 20001 bindings configured, the limit is 20000", 0, true},
		{"a lower cap", "max_bindings: 5\n", 2, 3, "max_bindings: 6 bindings configured, the limit is 5", 0, true},
		{"at the cap", "max_bindings: 6\n", 2, 3, "", 6, false},
		{"a higher cap", "max_bindings: 30000\n", 3, 10000, "", 30000, false},
		{"zero", "max_bindings: 0\n", 1, 1, "max_bindings: 0 is outside 1..500000", 0, false},
		{"above the cap of caps", "max_bindings: 500001\n", 1, 1, "max_bindings: 500001 is outside 1..500000", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse(cfg(tc.top, tc.tenants, tc.per), t.TempDir())
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if n := c.bindingCount(); n != tc.wantBindings {
					t.Errorf("%d bindings, want %d", n, tc.wantBindings)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			var ce *Error
			if tc.wantOnlyError && (!errors.As(err, &ce) || len(ce.Problems) != 1) {
				t.Errorf("want the size problem alone, got %v", err)
			}
		})
	}
}

// TestMaxBindingsRefusesHugeConfigAtOnce: a config of 162,000 bindings is refused for its
// size, with the two numbers, without a check per binding; the time it took is logged.
func TestMaxBindingsRefusesHugeConfigAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("162,000 bindings")
	}
	data := densityYAML(162000)
	data = []byte(strings.Replace(string(data), "max_bindings: 162000\n", "", 1))
	start := time.Now()
	_, err := Parse(data, t.TempDir())
	t.Logf("config.Parse of 162000 bindings (%d MiB of YAML) refused in %s", len(data)>>20, time.Since(start).Round(time.Millisecond))
	var ce *Error
	if !errors.As(err, &ce) || len(ce.Problems) != 1 || ce.Problems[0].Error() != "max_bindings: 162000 bindings configured, the limit is 20000" {
		t.Fatalf("error %v, want the size problem alone", err)
	}
}

// TestMetricsPerBindingDefault: metrics.per_binding defaults to true and reads false.
func TestMetricsPerBindingDefault(t *testing.T) {
	for _, tc := range []struct {
		top  string
		want bool
	}{{"", true}, {"metrics: {per_binding: true}\n", true}, {"metrics: {per_binding: false}\n", false}} {
		c, err := Parse([]byte("data_dir: /tmp/wq\n"+tc.top+"tenants:\n  a:\n    bindings:\n      b: {queue: q, module: 'builtin:echo-tinygo'}\n"), t.TempDir())
		if err != nil {
			t.Fatalf("%q: %v", tc.top, err)
		}
		if c.Metrics.PerBinding != tc.want {
			t.Errorf("%q: per_binding %v, want %v", tc.top, c.Metrics.PerBinding, tc.want)
		}
	}
}
