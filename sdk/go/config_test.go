//go:build !wasip1

package wqhost

import (
	"strconv"
	"testing"
)

// configHost is a native host with config values that counts config_get calls per key.
type configHost struct {
	emptyHost
	values map[string]string
	calls  map[string]int
}

func (h *configHost) config(key string, buf []byte) int32 {
	h.calls[key]++
	return fakeGet(h.values)(key, buf)
}

func TestConfigAsksTheHostOncePerKey(t *testing.T) {
	h := &configHost{values: map[string]string{"tax_rate": "0.2", "empty": ""}, calls: map[string]int{}}
	oldNative, oldG := native, g
	native, g = h, guest{}
	t.Cleanup(func() { native, g = oldNative, oldG })

	tests := []struct {
		key    string
		want   string
		wantOK bool
	}{{"tax_rate", "0.2", true}, {"empty", "", true}, {"missing", "", false}}
	for range 3 {
		for _, tc := range tests {
			if got, ok := Config(tc.key); got != tc.want || ok != tc.wantOK {
				t.Errorf("Config(%q) = %q, %v; want %q, %v", tc.key, got, ok, tc.want, tc.wantOK)
			}
		}
	}
	for _, tc := range tests {
		if h.calls[tc.key] != 1 {
			t.Errorf("config_get(%q) called %d times for 3 Config calls, want 1 (config is fixed for an instance's life)", tc.key, h.calls[tc.key])
		}
	}

	// Past maxCachedConfig keys, Config still answers, from the host each time.
	for i := range maxCachedConfig {
		Config("k" + strconv.Itoa(i))
	}
	for range 2 {
		if got, ok := Config("tax_rate"); got != "0.2" || !ok {
			t.Errorf("Config(tax_rate) after many keys = %q, %v", got, ok)
		}
		if _, ok := Config("late"); ok {
			t.Error("Config(late) found a key the host does not have")
		}
	}
	if h.calls["late"] != 2 {
		t.Errorf("config_get(late) called %d times, want 2: a key past the cache's bound is not kept", h.calls["late"])
	}
	if allocs := testing.AllocsPerRun(100, func() { Config("tax_rate") }); allocs != 0 {
		t.Errorf("Config of a kept key allocates %.0f times, want 0", allocs)
	}
}
