package main

import (
	"encoding/json"
	"regexp"
	"strconv"
	"testing"
)

// TestCallShowsUsage: `wqhost call` prints the call's metering (docs/metering.md) in text and
// JSON, for a call that failed too: a loop stopped at its time limit spent many allowances
// of fuel.
func TestCallShowsUsage(t *testing.T) {
	vowels := "examples/handlers/count-vowels-tinygo/count-vowels-tinygo.wasm"
	r := wq(t, repoRoot, "call", vowels, "--body", "Hello, World")
	r.expect(t, 0, "call")
	m := regexp.MustCompile(`usage: fuel (\d+), wall \d+µs, host \d+µs, memory (\d+) bytes, http 0 requests 0 bytes`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no usage line in\n%s", r.stdout)
	}
	if fuel, _ := strconv.ParseUint(m[1], 10, 64); fuel == 0 {
		t.Errorf("usage line %q: no fuel", m[0])
	}
	if mem, _ := strconv.ParseUint(m[2], 10, 64); mem == 0 {
		t.Errorf("usage line %q: no memory", m[0])
	}

	r = wq(t, repoRoot, "call", "--json", "--timeout", "100ms", "runtime/testdata/spin/spin-tinygo.wasm", "--body", "loop")
	r.expect(t, 1, "call of a loop")
	var res struct {
		Status string `json:"status"`
		Usage  struct {
			Fuel   uint64 `json:"fuel"`
			WallUs int64  `json:"wall_us"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	if res.Status != "failed" || res.Usage.Fuel < 1<<20 || res.Usage.WallUs < 50_000 {
		t.Fatalf("a loop stopped at its 100ms limit: status %s, usage %+v: want failed, over a million fuel, 50ms or more", res.Status, res.Usage)
	}
}
