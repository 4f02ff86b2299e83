package host

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/host/source"
	"github.com/wqhost/wqhost/listener/queue"
)

// The hot-reload fixture: two builds of testdata/versioned (see its build.sh) whose outputs
// are "v1:<body>" and "v2:<body>".
var fixtureVersions = map[string]string{"v1": "testdata/versioned/v1.wasm", "v2": "testdata/versioned/v2.wasm"}

func readFixture(t testing.TB, v string) []byte {
	t.Helper()
	b, err := os.ReadFile(fixtureVersions[v])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// reloadHost writes handler.wasm (version v1) and a config file into a temp dir and builds
// a host from the file, as `wqhost run -c` does. tenants is the tenants section (indent 2).
func reloadHost(t testing.TB, tenants string) (h *Host, dir string) {
	t.Helper()
	dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "handler.wasm"), readFixture(t, "v1"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeConfig(t, dir, tenants)
	h = hostFromDir(t, dir)
	h.debounce = 30 * time.Millisecond
	return h, dir
}

// hostFromDir builds a host from the wqhost.yaml in dir, as `wqhost run -c` does, with no
// WQHOST_ variables; the caller closes it.
func hostFromDir(t testing.TB, dir string) *Host {
	t.Helper()
	cfg, err := source.LoadConfig(config.LoadOptions{File: filepath.Join(dir, "wqhost.yaml"), Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(context.Background(), cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func writeConfig(t testing.TB, dir, tenants string) {
	t.Helper()
	writeConfigTop(t, dir, "", tenants)
}

// writeConfigTop is writeConfig with extra top-level keys (each line ending in a newline).
func writeConfigTop(t testing.TB, dir, top, tenants string) {
	t.Helper()
	yaml := fmt.Sprintf(`data_dir: %s
cache_dir: %s
admin: {addr: "off"}
backends:
  mem: {type: memory}
%stenants:
%s`, filepath.Join(dir, "data"), cacheDir, top, tenants)
	// Rename over the old file, as editors and config management do.
	tmp := filepath.Join(dir, ".wqhost.yaml.tmp")
	if err := os.WriteFile(tmp, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "wqhost.yaml")); err != nil {
		t.Fatal(err)
	}
}

// replaceModule puts data at path the way deploys do, alternating the two common ways:
// rename a finished file over it, or rewrite it in place in two writes (the watcher must
// not load the half-written file).
func replaceModule(t testing.TB, path string, data []byte, inPlace bool) {
	t.Helper()
	if !inPlace {
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
		return
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	half := len(data) / 2
	if _, err := f.Write(data[:half]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	if _, err := f.Write(data[half:]); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func outDepth(t testing.TB, q queue.Queue) int64 {
	t.Helper()
	d, err := q.Depth(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func waitUntil(t testing.TB, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestHotReloadUnderLoad replaces the module file 10 times (alternating v1 and v2) while
// 20,000 messages flow, and drops a corrupt module in mid-run: no message is lost or fails
// because of a swap, each version's outputs appear after it was swapped in, and the corrupt
// file leaves the previous version serving with the error in status.
func TestHotReloadUnderLoad(t *testing.T) {
	const (
		total  = 20000
		swaps  = 10
		chunks = swaps + 2 // one chunk before the first swap, one during the corrupt module
	)
	h, dir := reloadHost(t, `
  default:
    bindings:
      echo:
        backend: mem
        queue: in
        output: out
        module: handler.wasm
        batch_size: 32
        max_workers: 4
        pool: {min_instances: 2, max_instances: 4}
`)
	modPath := filepath.Join(dir, "handler.wasm")
	ctx := context.Background()
	in, err := h.OpenQueue(ctx, "default", "in")
	if err != nil {
		t.Fatal(err)
	}
	out, err := h.OpenQueue(ctx, "default", "out")
	if err != nil {
		t.Fatal(err)
	}
	stop := run(t, h)

	digest := map[string]string{"v1": digestOf(readFixture(t, "v1")), "v2": digestOf(readFixture(t, "v2"))}
	serving := "v1"
	// chunkVersions[c] is the version serving when chunk c was sent (every message of the
	// chunk was sent after that version was confirmed serving).
	chunkVersions := make([]string, chunks)
	corruptChunk := chunks / 2
	per := total / chunks
	sent := 0
	var swapTimes []time.Duration
	for c := range chunks {
		n := per
		if c == chunks-1 {
			n = total - sent
		}
		chunkVersions[c] = serving
		sendRange := func(from, to int) {
			for i := from; i < to; i++ {
				if _, err := in.Send(ctx, fmt.Appendf(nil, "%d:%d", c, sent+i), queue.SendOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		}
		first := n
		if c == corruptChunk {
			first = n / 2 // the rest is sent once the corrupt module has been refused
		}
		sendRange(0, first)
		base := int64(sent)
		// Let part of the chunk through, so the swap happens with messages in flight and
		// more queued behind them.
		waitUntil(t, "the chunk to start flowing", 30*time.Second, func() bool { return outDepth(t, out) >= base+int64(n/4) })
		if c == chunks-1 {
			sent += n
			break
		}
		if c == corruptChunk {
			// A broken upload: garbage with a wasm header. The previous version must keep
			// serving the rest of this chunk and the error must show in status.
			bad := append([]byte("\x00asm\x01\x00\x00\x00"), bytes.Repeat([]byte{0xff}, 4096)...)
			replaceModule(t, modPath, bad, false)
			waitUntil(t, "the corrupt module's error in status", 30*time.Second, func() bool {
				return bindingStatus(t, h, "default", "echo").LastReloadError != ""
			})
			s := bindingStatus(t, h, "default", "echo")
			if s.ModuleDigest != digest[serving] {
				t.Fatalf("after a corrupt upload the digest is %s, want the previous version %s (%s)", s.ModuleDigest, serving, digest[serving])
			}
			t.Logf("corrupt module refused: %s", s.LastReloadError)
			sendRange(first, n)
			sent += n
			// The whole chunk must be handled by the previous version: wait for it.
			waitUntil(t, "the chunk to drain", 60*time.Second, func() bool { return outDepth(t, out) >= int64(sent) })
			chunkVersions[c] = serving + "!" // marks the chunk that must be all previous version
			continue
		}
		sent += n
		next := map[string]string{"v1": "v2", "v2": "v1"}[serving]
		start := time.Now()
		replaceModule(t, modPath, readFixture(t, next), len(swapTimes)%2 == 1)
		waitUntil(t, "the new version to serve", 30*time.Second, func() bool {
			return bindingStatus(t, h, "default", "echo").ModuleDigest == digest[next]
		})
		swapTimes = append(swapTimes, time.Since(start))
		serving = next
	}
	waitUntil(t, "every output", 120*time.Second, func() bool { return outDepth(t, out) >= total })
	if len(swapTimes) != swaps {
		t.Fatalf("%d swaps, want %d", len(swapTimes), swaps)
	}

	// Writing the serving bytes again (a touch, a redeploy of the same build) swaps nothing.
	s := bindingStatus(t, h, "default", "echo")
	replaceModule(t, modPath, readFixture(t, serving), true)
	time.Sleep(10 * h.debounce)
	if s2 := bindingStatus(t, h, "default", "echo"); s2.Reloads != s.Reloads || s2.LastReloadError != "" {
		t.Errorf("rewriting the same bytes: reloads %d -> %d, last error %q", s.Reloads, s2.Reloads, s2.LastReloadError)
	}
	if s.Reloads != swaps {
		t.Errorf("status reloads = %d, want %d", s.Reloads, swaps)
	}

	// Every message exactly once in the output, tagged with the version that handled it.
	seen := make([]int, total)
	byChunk := make([]map[string]int, chunks)
	for i := range byChunk {
		byChunk[i] = map[string]int{}
	}
	for _, m := range drainBodies(t, h, "default", "out") {
		parts := strings.SplitN(string(m.Body), ":", 3)
		if len(parts) != 3 {
			t.Fatalf("unexpected output %q", m.Body)
		}
		v := parts[0]
		c, err1 := strconv.Atoi(parts[1])
		i, err2 := strconv.Atoi(parts[2])
		if err1 != nil || err2 != nil || c < 0 || c >= chunks || i < 0 || i >= total {
			t.Fatalf("unexpected output %q", m.Body)
		}
		seen[i]++
		byChunk[c][v]++
	}
	lost, dup := 0, 0
	for _, n := range seen {
		if n == 0 {
			lost++
		}
		if n > 1 {
			dup++
		}
	}
	st := bindingStatus(t, h, "default", "echo")
	failed := int(st.Failed + st.Poisoned)
	t.Logf("reload: lost=%d failed=%d", lost, failed)
	fmt.Printf("reload: lost=%d failed=%d (swaps=%d, duplicates=%d, messages=%d)\n", lost, failed, len(swapTimes), dup, total)
	t.Logf("file write -> new version serving: %v", swapTimes)
	if lost != 0 || failed != 0 || dup != 0 {
		t.Errorf("lost=%d failed=%d duplicates=%d, want 0", lost, failed, dup)
	}
	if d := depth(t, h, "default", "in-poison"); d != 0 {
		t.Errorf("%d messages dead-lettered", d)
	}
	// Outputs switch version: each chunk's messages were sent while its version served, so
	// most of each carries that version (the rest carry the next one, swapped in mid-chunk).
	for c, want := range chunkVersions {
		got := byChunk[c]
		if prev, ok := strings.CutSuffix(want, "!"); ok {
			if got[prev] != per || len(got) != 1 {
				t.Errorf("chunk %d (corrupt module on disk): versions %v, want all %d from %s", c, got, per, prev)
			}
			continue
		}
		if got[want] == 0 {
			t.Errorf("chunk %d sent while %s served: versions %v", c, want, got)
		}
		for v := range got {
			if v != "v1" && v != "v2" {
				t.Errorf("chunk %d: unknown version %q", c, v)
			}
		}
	}
	// Retired pools were closed after draining: their calls were added to the binding's count.
	if st.Pool.Calls != total {
		t.Errorf("pool calls = %d, want %d (a retired pool not drained and closed?)", st.Pool.Calls, total)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestHotReloadByAdminAndConfig: POST /v1/reload swaps a changed module and reports it; a
// config change adds, rebuilds and removes bindings without touching the others; an invalid
// config changes nothing and says why.
func TestHotReloadByAdminAndConfig(t *testing.T) {
	binding := func(name, queue string) string {
		return fmt.Sprintf("      %s: {backend: mem, queue: %s, output: out-%s, module: handler.wasm, backoff: {min: 5ms, max: 20ms}}\n", name, queue, queue)
	}
	h, dir := reloadHost(t, "  default:\n    bindings:\n"+binding("a", "a")+binding("b", "b"))
	h.debounce = time.Hour // only explicit reloads in this test
	stop := run(t, h)
	srv := httptest.NewServer(h.AdminHandler())
	defer srv.Close()

	send(t, h, "default", "a", "1")
	eventually(t, "a's output", func() bool { return depth(t, h, "default", "out-a") == 1 })

	// Module changed on disk, reloaded through the admin API.
	replaceModule(t, filepath.Join(dir, "handler.wasm"), readFixture(t, "v2"), false)
	body := do(t, "POST", srv.URL+"/v1/reload", "", "", 200)
	if !strings.Contains(body, `"result": "reloaded"`) || !strings.Contains(body, digestOf(readFixture(t, "v2"))) {
		t.Errorf("reload answer does not report the swap: %s", body)
	}
	send(t, h, "default", "a", "2")
	eventually(t, "a's second output", func() bool { return depth(t, h, "default", "out-a") == 2 })
	bodies := drainBodies(t, h, "default", "out-a")
	if string(bodies[0].Body)+","+string(bodies[1].Body) != "v1:1,v2:2" {
		t.Errorf("outputs = %q, %q; want v1:1, v2:2", bodies[0].Body, bodies[1].Body)
	}
	bBefore := h.bindingNamed("default", "b")

	// A corrupt module through the admin API: 422 naming the binding; the old one serves.
	replaceModule(t, filepath.Join(dir, "handler.wasm"), []byte("not wasm"), false)
	body = do(t, "POST", srv.URL+"/v1/reload", "", "", 422)
	if !strings.Contains(body, "tenants.default.bindings.a") || !strings.Contains(body, "handler.wasm") {
		t.Errorf("failed reload answer does not name the binding and module: %s", body)
	}
	if s := bindingStatus(t, h, "default", "a"); s.ModuleDigest != digestOf(readFixture(t, "v2")) || !strings.Contains(s.LastReloadError, "handler.wasm") {
		t.Errorf("after a corrupt module: digest %s, last error %q", s.ModuleDigest, s.LastReloadError)
	}
	replaceModule(t, filepath.Join(dir, "handler.wasm"), readFixture(t, "v2"), false)

	// An invalid config changes nothing.
	writeConfig(t, dir, "  default:\n    bindings:\n      a: {backend: mem, queue: a, module: missing.wasm}\n")
	body = do(t, "POST", srv.URL+"/v1/reload", "", "", 422)
	if !strings.Contains(body, "missing.wasm") || !strings.Contains(body, "running config stays") {
		t.Errorf("invalid config answer: %s", body)
	}
	if len(h.bindings()) != 2 {
		t.Fatalf("an invalid config changed the bindings: %d", len(h.bindings()))
	}

	// A restart-only change (a host-level setting outside the tenants) is refused naming it.
	writeConfigTop(t, dir, "log: {format: json}\n", "  default:\n    bindings:\n"+binding("a", "a")+binding("b", "b"))
	body = do(t, "POST", srv.URL+"/v1/reload", "", "", 422)
	if !strings.Contains(body, "log.format changed; these need a restart") {
		t.Errorf("restart-only change answer: %s", body)
	}
	if h.bindingNamed("default", "b") != bBefore {
		t.Error("a refused config reload restarted a binding")
	}
	if st := h.Status(context.Background()); !strings.Contains(st.LastConfigReloadError, "log.format changed") || st.LastConfigReloadErrorAt == nil {
		t.Errorf("status after a refused config reload: last config reload error %q at %v", st.LastConfigReloadError, st.LastConfigReloadErrorAt)
	}

	// Change a (new queue), keep b, add c: b is the same binding afterwards.
	writeConfig(t, dir, "  default:\n    bindings:\n"+binding("a", "a2")+binding("b", "b")+binding("c", "c"))
	if err := h.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h.bindingNamed("default", "b") != bBefore {
		t.Error("an unchanged binding was restarted by a config reload")
	}
	if st := h.Status(context.Background()); st.LastConfigReloadError != "" {
		t.Errorf("a config reload that succeeded left the last error: %q", st.LastConfigReloadError)
	}
	send(t, h, "default", "a2", "x")
	send(t, h, "default", "c", "y")
	eventually(t, "the rebuilt and the added binding's outputs", func() bool {
		return depth(t, h, "default", "out-a2") == 1 && depth(t, h, "default", "out-c") == 1
	})
	// Remove c: it stops; its queue is no longer read.
	writeConfig(t, dir, "  default:\n    bindings:\n"+binding("a", "a2")+binding("b", "b"))
	if err := h.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h.bindingNamed("default", "c") != nil {
		t.Fatal("removed binding still listed")
	}
	send(t, h, "default", "c", "z")
	time.Sleep(100 * time.Millisecond)
	if d := depth(t, h, "default", "c"); d != 1 {
		t.Errorf("removed binding's queue depth = %d, want 1 (nobody reads it)", d)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestHotReloadPluginBinary: a plugin binary replaced on disk is restarted from the new file
// (new pid), while messages keep flowing.
func TestHotReloadPluginBinary(t *testing.T) {
	bin := buildLatencyScaler(t)
	h, _ := reloadHost(t, fmt.Sprintf(`
  default:
    bindings:
      echo:
        backend: mem
        queue: in
        output: out
        module: handler.wasm
        scaler: {plugin: %q, args: ["-target", "50ms"], timeout: 200ms}
`, bin))
	run(t, h)
	send(t, h, "default", "in", "a")
	eventually(t, "output", func() bool { return depth(t, h, "default", "out") == 1 })
	pid := bindingStatus(t, h, "default", "echo").Plugins[0].Pid

	// A rebuilt binary differs in bytes: append a byte (an ELF file ignores trailing data).
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	tmp := bin + ".new"
	if err := os.WriteFile(tmp, append(data, 0), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, bin); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the plugin restarted from the new binary", func() bool {
		p := bindingStatus(t, h, "default", "echo").Plugins[0]
		return p.Pid != pid && p.Phase == "running"
	})
	send(t, h, "default", "in", "b")
	eventually(t, "output after the plugin reload", func() bool { return depth(t, h, "default", "out") == 2 })
}

// TestHotReloadConfigFileWatched: saving the config file is enough; a binding added there
// starts serving without a signal or API call, and a config saved with an error changes
// nothing and shows nowhere but the log (the bindings keep serving).
func TestHotReloadConfigFileWatched(t *testing.T) {
	binding := func(name, queue string) string {
		return fmt.Sprintf("      %s: {backend: mem, queue: %s, output: out-%s, module: handler.wasm, backoff: {min: 5ms, max: 20ms}}\n", name, queue, queue)
	}
	h, dir := reloadHost(t, "  default:\n    bindings:\n"+binding("a", "a"))
	run(t, h)
	writeConfig(t, dir, "  default:\n    bindings:\n      a: {backend: mem, queue: a, module: handler.wasm, bogus_key: 1}\n")
	time.Sleep(10 * h.debounce)
	if len(h.bindings()) != 1 || h.bindingNamed("default", "a").cfg.Output != "out-a" {
		t.Fatal("an invalid config file changed the bindings")
	}
	writeConfig(t, dir, "  default:\n    bindings:\n"+binding("a", "a")+binding("b", "b"))
	eventually(t, "the binding added in the file to start", func() bool { return h.bindingNamed("default", "b") != nil })
	send(t, h, "default", "b", "hello")
	eventually(t, "b's output", func() bool { return depth(t, h, "default", "out-b") == 1 })
	if got := string(drainBodies(t, h, "default", "out-b")[0].Body); got != "v1:hello" {
		t.Errorf("output %q, want v1:hello", got)
	}
}
