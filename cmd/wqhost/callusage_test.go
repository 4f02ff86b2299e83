package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/wqhost/wqhost/internal/wasmtest"
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

// TestCallShowsStartFuel: `wqhost call` reports what the instance's start function cost, in
// text and JSON: an _initialize of 2²² loop passes shows at least 2²¹ fuel of start, inside
// the call's fuel, where the handler itself spends a few units. Before, the warm instance's
// start was never metered: a 2·10⁹-pass start printed `usage: fuel 1`.
func TestCallShowsStartFuel(t *testing.T) {
	const passes = 1 << 22
	mod := wasmtest.Module(
		wasmtest.Func{Export: "wqhost_abi_v1"},
		wasmtest.Func{Export: "_initialize", Body: wasmtest.CountTo(0, passes)},
		wasmtest.Handle(wasmtest.I32Const(0)),
	)
	path := filepath.Join(t.TempDir(), "start.wasm")
	if err := os.WriteFile(path, mod, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		read func(stdout string) (fuel, start uint64, ok bool)
	}{
		{"text", []string{"call", path}, func(out string) (uint64, uint64, bool) {
			m := regexp.MustCompile(`usage: fuel (\d+), .*, start: fuel (\d+) in \d+µs`).FindStringSubmatch(out)
			if m == nil {
				return 0, 0, false
			}
			fuel, _ := strconv.ParseUint(m[1], 10, 64)
			start, _ := strconv.ParseUint(m[2], 10, 64)
			return fuel, start, true
		}},
		{"json", []string{"call", "--json", path}, func(out string) (uint64, uint64, bool) {
			var res struct {
				Usage struct {
					Fuel      uint64 `json:"fuel"`
					StartFuel uint64 `json:"start_fuel"`
				} `json:"usage"`
			}
			err := json.Unmarshal([]byte(out), &res)
			return res.Usage.Fuel, res.Usage.StartFuel, err == nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := wq(t, repoRoot, tc.args...)
			r.expect(t, 0, "call")
			fuel, start, ok := tc.read(r.stdout)
			if !ok {
				t.Fatalf("no usage with a start in\n%s", r.stdout)
			}
			if start < passes/2 || fuel < start || fuel-start > 1000 {
				t.Fatalf("fuel %d, start fuel %d: want the start's %d passes' fuel, inside fuel, plus the handler's few units\n%s", fuel, start, passes, r.stdout)
			}
		})
	}
}

// TestCallPrintsWhyItFailed: `wqhost call` of a failing handler prints the cause the host
// would record for it (outcome.Cause: the breaker's and the dead letter's attempts'), in
// text and JSON; a verdict has none.
func TestCallPrintsWhyItFailed(t *testing.T) {
	trap := filepath.Join(t.TempDir(), "trap.wasm")
	mod := wasmtest.Module(
		wasmtest.Func{Export: "wqhost_abi_v1"},
		wasmtest.Func{Export: "wqhost_handle", Results: []byte{wasmtest.I32}, Body: []byte{0x00}}, // unreachable
	)
	if err := os.WriteFile(trap, mod, 0o644); err != nil {
		t.Fatal(err)
	}
	wq(t, repoRoot, "call", trap).expect(t, 1, "call of a trap", "status: failed", "\ncause: trap\n", "handler trapped")

	r := wq(t, repoRoot, "call", "--json", "--timeout", "100ms", "runtime/testdata/spin/spin-tinygo.wasm", "--body", "loop")
	r.expect(t, 1, "call of a loop")
	var res struct {
		Status string `json:"status"`
		Cause  string `json:"cause"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	if res.Status != "failed" || res.Cause != "timeout" {
		t.Errorf("a loop stopped at its time limit: status %q cause %q; want failed, timeout", res.Status, res.Cause)
	}

	r = wq(t, repoRoot, "call", "examples/handlers/billing-tinygo/billing-tinygo.wasm", "--body", `{"id":`)
	r.expect(t, 1, "call of a reject", "status: reject")
	if strings.Contains(r.stdout, "cause:") {
		t.Errorf("a reject prints a cause:\n%s", r.stdout)
	}
}
