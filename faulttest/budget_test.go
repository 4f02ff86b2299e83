package faulttest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/wqhost/wqhost/host"
	"github.com/wqhost/wqhost/internal/wasmtest"
)

// The hostile tenant's probes (issue #37), each a legal module (internal/wasmtest's
// TestBudgetProbesAreLegal) scaled down from what the issue measured to what still takes a
// 1 GiB container past its limit on its own or with the others, in a few minutes of a
// loaded 2-core machine.
const (
	// The type bomb: 3,000 function types of 1,000 parameters (3 MB). wazero builds an
	// entry preamble per type in the host process on every load, cache hit or not: 355 MB
	// and 11 s here (the 8,000 types: 819 MB, 19 s). runtime's max_type_values
	// refuses it now, so it arrives as a hot swap (a config naming it would be refused
	// whole).
	typeBombTypes, typeBombParams = 3000, 1000
	// Big modules: four bindings of 8 MB modules (eight 1 MB straight-line functions, each
	// at the max_function_bytes default), hot-swapped three times by rewriting the files:
	// each version compiles again, in a child of about 500 MB, beside the host's own load
	// (the 20 MB: 1 GB each, 2,959 MiB for four at start).
	bigBindings, bigBytes, bigFuncBytes, bigSwaps = 4, 8_000_000, 1_000_000, 3
	// Extism plugins allocating 1 MiB kernel blocks up to the tenant's 128 MiB memory limit,
	// eight at once: the arena lives on the host's heap, doubling as it grows (461 MB for
	// one; 1,315 MiB for eight).
	extismBlock, extismCalls = 1 << 20, 8
	// A start function counting to 3·10⁸ (about 1.5 s) before a handler that traps: each
	// delivery gets a fresh instance and pays it again, CPU no handler call's time limit
	// meters.
	startLoop, startMessages = 300_000_000, 4
	// Endless recursions, 16 at once: wazero grows each call's native stack to about
	// 100 MB on the Go heap before its stack overflow trap (eight at once took a host to
	// 1.4 GB).
	deepCalls = 16

	// The healthy tenant's stream: chunks of healthyChunk echo messages every healthyPace,
	// the same pace alone (healthyChunks chunks) and beside the hostile tenant (as long as
	// the hostile tenant's arrival and hot swaps last, at least as many).
	healthyChunks, healthyChunk, healthyPace = 40, 250, 500 * time.Millisecond
)

// containerDataDir and containerConfDir are where the test mounts its directories in the
// container: the image's data directory (its working directory, writable) and the config
// with the modules (read only; the test rewrites files in it from outside for hot swaps).
const (
	containerDataDir = "/var/lib/wqhost"
	containerConfDir = "/budget"
	imageUser        = "65532:65532" // the image's non-root user (deploy/image.UID, GID)
)

// TestFaultBudget: one tenant's legal modules must never take the host past its memory,
// CPU or sessions (issue #37). The real image runs under podman with the chart's default
// limit (--memory 1g, no swap) and a local (SQLite) store; a healthy tenant drains a steady
// stream of echo messages alone, then again while a hostile tenant arrives by a config
// reload and hot-swaps in the type bomb and four big modules three times, beside Extism
// plugins allocating to their limit, trapping handlers behind slow start functions and
// endless recursions. It prints
//
//	fault budget: oom-kills=0 healthy-lost=0 healthy-ratio=R host-peak=M MiB budget=B MiB refused=N
//
// (healthy-ratio: the healthy tenant's throughput beside the hostile one ÷ alone; the issue's
// goal is ≥ 0.5, printed, not asserted: a wall-clock ratio on a shared 2-core machine is
// noise) and fails on any OOM kill in the container or any healthy message not processed.
func TestFaultBudget(t *testing.T) {
	needPodman(t, "budget")
	img := buildImage(t)

	conf := t.TempDir()
	data := filepath.Join(t.TempDir(), "data")
	for _, d := range []string{conf, data} {
		if err := os.MkdirAll(d, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o777); err != nil { // past the umask: the image's user writes data
			t.Fatal(err)
		}
	}
	writeFileAtomic(t, filepath.Join(conf, "wqhost.yaml"), []byte(budgetConfig(false)))
	admin := freeAddr(t)
	c := runContainer(t, 250*time.Millisecond,
		"--memory", "1g", "--memory-swap", "1g",
		"--read-only", "--network", "host", "--cap-drop", "all", "--security-opt", "no-new-privileges",
		"--user", imageUser, "-v", data+":"+containerDataDir, "-v", conf+":"+containerConfDir+":ro",
		img, "run", "--config", containerConfDir+"/wqhost.yaml", "--admin", admin)
	api := &adminClient{base: "http://" + admin, c: c}
	if err := api.waitReady(2 * time.Minute); err != nil {
		t.Fatal(err)
	}

	// The healthy tenant alone.
	closed := make(chan struct{})
	close(closed)
	aloneIDs, aloneTook, err := api.stream("a-", 0, closed)
	if err != nil {
		t.Fatalf("healthy tenant alone: %v", err)
	}
	aloneRate := float64(len(aloneIDs)) / aloneTook.Seconds()
	t.Logf("healthy alone: %d messages in %s (%.0f/s)", len(aloneIDs), aloneTook.Round(time.Millisecond), aloneRate)

	// The hostile tenant arrives, and the same stream runs beside it.
	writeHostileModules(t, conf, 1)
	writeFileAtomic(t, filepath.Join(conf, "wqhost.yaml"), []byte(budgetConfig(true)))
	type streamed struct {
		ids  []string
		took time.Duration
		err  error
	}
	besideDone, hostileDone := make(chan streamed, 1), make(chan struct{})
	go func() {
		ids, took, err := api.stream("b-", uint64(len(aloneIDs)), hostileDone)
		besideDone <- streamed{ids, took, err}
	}()
	refusedSends, arrived := 0, time.Now()
	if err := api.hostileTenantUp(3 * time.Minute); err != nil {
		if !c.gone() { // else the container's end is the finding, reported below
			t.Errorf("hostile tenant: %v", err)
		}
		t.Logf("hostile tenant: %v", err)
	} else {
		t.Logf("hostile tenant up %s after its config was written", time.Since(arrived).Round(time.Millisecond))
		for _, q := range []struct {
			queue string
			n     int
		}{{"typebomb", 1}, {"extism", extismCalls}, {"start", startMessages}, {"deep", deepCalls}, {"big1", 1}, {"big2", 1}, {"big3", 1}, {"big4", 1}} {
			if err := api.send("hostile", q.queue, "h-", q.n); err != nil {
				refusedSends++
				t.Logf("hostile send to %s: %v", q.queue, err)
			}
		}
		for v := 2; v <= 1+bigSwaps && !c.gone(); v++ {
			before, err := api.bigDigests()
			if err != nil {
				t.Logf("before hot swap to version %d: %v", v, err)
			}
			if v > 2 {
				delete(before, "typebomb") // swapped once, with version 2
			}
			writeHostileModules(t, conf, v)
			if err := api.bigSwapped(before, 5*time.Minute); err != nil {
				t.Logf("hot swap to version %d: %v", v, err)
			} else {
				t.Logf("hot swap to version %d done %s after the hostile tenant's config", v, time.Since(arrived).Round(time.Millisecond))
			}
		}
	}
	close(hostileDone)
	beside := <-besideDone
	if beside.err != nil {
		t.Logf("healthy stream beside the hostile tenant: %v", beside.err)
	}

	// What the budgets refused: the tenants' refused reservations (a host's refusal counts
	// in the tenant it refused too) and the hostile bindings whose new version was not
	// loaded (the type bomb's cap, a compile past its budget).
	budgetMiB, refused := int64(0), int64(0)
	if st, err := api.status(); err != nil {
		t.Logf("final status: %v", err)
	} else {
		if st.Memory != nil {
			budgetMiB = st.Memory.Limit >> 20
		}
		for _, tn := range st.Tenants {
			refused += tn.Memory.Refused
			for _, b := range tn.Bindings {
				if tn.Name == "hostile" && b.LastReloadError != "" {
					refused++
					t.Logf("hostile binding %s: %s", b.Name, b.LastReloadError)
				}
			}
			t.Logf("tenant %s memory: %+v", tn.Name, tn.Memory)
		}
		t.Logf("host memory: %+v", st.Memory)
	}
	peak, cgroupKills := c.memory()
	if high, stat := c.highWater(); high > 0 {
		t.Logf("highest memory sampled: %d MiB (%s)", high>>20, stat)
	}
	code, oomKilled := c.exit(30 * time.Second)
	oomKills := cgroupKills
	if oomKilled || code == 137 { // podman's flag misses a kill the sampler saw too late
		oomKills = max(oomKills, 1)
	}
	outs := bodies(readAll(t, loadConfig(t, writeConfig(t, t.TempDir(), testSideConfig(data)), nil), "healthy", "steady-out"))
	counted, missing := countIDs(append(aloneIDs, beside.ids...), outs)
	besideProcessed, _ := countIDs(beside.ids, outs)
	ratio := 0.0
	if beside.took > 0 && aloneRate > 0 {
		ratio = float64(besideProcessed.processed) / beside.took.Seconds() / aloneRate
	}
	line := fmt.Sprintf("fault budget: oom-kills=%d healthy-lost=%d healthy-ratio=%.2f host-peak=%d MiB budget=%d MiB refused=%d",
		oomKills, counted.lost, ratio, peak>>20, budgetMiB, refused)
	fmt.Println(line)
	t.Log(line)
	t.Logf("container exit %d (OOMKilled %t, cgroup oom_kill %d); healthy: %d sent alone, %d beside (%d processed in %s); hostile sends refused: %d",
		code, oomKilled, cgroupKills, len(aloneIDs), len(beside.ids), besideProcessed.processed, beside.took.Round(time.Millisecond), refusedSends)
	if oomKills != 0 {
		t.Errorf("%d OOM kills in the container (exit %d, OOMKilled %t): the hostile tenant's legal modules took it past its 1 GiB", oomKills, code, oomKilled)
	}
	if counted.lost != 0 {
		t.Errorf("%d healthy messages accepted but never processed (e.g. %v)", counted.lost, missing)
	}
	if refused == 0 && oomKills == 0 {
		t.Errorf("nothing refused: the probes exceed any budget a 1 GiB container can hold, so a budget must have said no")
	}
	if budgetMiB <= 0 || budgetMiB >= 1024 {
		t.Errorf("host memory budget %d MiB; want one from the container's 1 GiB limit, less headroom", budgetMiB)
	}
}

// budgetConfig is the container's config: the healthy tenant, and with hostile the hostile
// one with every probe.
func budgetConfig(hostile bool) string {
	cfg := fmt.Sprintf(`data_dir: %s/data
log: {level: warn}
tenants:
  healthy:
    bindings:
      steady: {queue: steady, output: steady-out, module: builtin:echo-go}
`, containerDataDir)
	if !hostile {
		return cfg
	}
	cfg += fmt.Sprintf(`  hostile:
    limits: {memory: 128MiB, timeout: 10s}
    bindings:
      typebomb: {queue: typebomb, module: %[1]s/typebomb.wasm}
      extism:
        queue: extism
        module: %[1]s/extism.wasm
        abi: extism
        batch_size: 1
        min_workers: %[2]d
        max_workers: %[2]d
        pool: {max_instances: %[2]d}
        max_dequeue_count: 2
        poison: {base_delay: 100ms, max_delay: 300ms}
      start:
        queue: start
        module: %[1]s/start.wasm
        max_dequeue_count: 3
        poison: {base_delay: 100ms, max_delay: 300ms}
      deep:
        queue: deep
        module: %[1]s/deep.wasm
        max_dequeue_count: 2
        min_workers: 2
        pool: {max_instances: %[3]d}
        poison: {base_delay: 100ms, max_delay: 300ms}
`, containerConfDir, extismCalls, deepCalls)
	for i := 1; i <= bigBindings; i++ {
		cfg += fmt.Sprintf("      big%d: {queue: big%d, module: %s/big%d.wasm}\n", i, i, containerConfDir, i)
	}
	return cfg
}

// testSideConfig reads the container's healthy queues from the test, through the data
// directory it mounted.
func testSideConfig(data string) string {
	return fmt.Sprintf(`data_dir: %s/data
tenants:
  healthy:
    bindings:
      steady: {queue: steady, output: steady-out, module: builtin:echo-go}
`, data)
}

// writeHostileModules generates the hostile tenant's modules into dir at version. Version 1
// is what the tenant arrives with: the Extism allocator and the slow start as they are, small
// modules for the type bomb's and the big bindings, since a config reload naming a module the
// host refuses is refused whole. Later versions hot-swap the type bomb and the big modules in,
// binding by binding, as a tenant deploying new builds would.
func writeHostileModules(t *testing.T, dir string, version int) {
	t.Helper()
	if version == 1 {
		writeFileAtomic(t, filepath.Join(dir, "typebomb.wasm"), wasmtest.TypeBomb(1, 1))
		writeFileAtomic(t, filepath.Join(dir, "extism.wasm"), wasmtest.ExtismAllocator(extismBlock))
		writeFileAtomic(t, filepath.Join(dir, "start.wasm"), wasmtest.SlowStartTrap(startLoop))
		writeFileAtomic(t, filepath.Join(dir, "deep.wasm"), wasmtest.Recursion(0))
	} else if version == 2 {
		writeFileAtomic(t, filepath.Join(dir, "typebomb.wasm"), wasmtest.TypeBomb(typeBombTypes, typeBombParams))
	}
	size := bigBytes
	if version == 1 {
		size = bigFuncBytes / 4
	}
	for i := 1; i <= bigBindings; i++ {
		// Each binding's version is a module of its own: no two share a compile.
		v := int32(version*100 + i)
		writeFileAtomic(t, filepath.Join(dir, fmt.Sprintf("big%d.wasm", i)), wasmtest.BigModule(size, min(bigFuncBytes, size), v))
	}
}

// writeFileAtomic replaces path by renaming a new file over it, as deploy tools do (the
// host's watcher then reads it whole), readable by the container's user.
func writeFileAtomic(t *testing.T, path string, b []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// adminClient drives the container's host through its admin API.
type adminClient struct {
	base string
	c    *container
}

func (a *adminClient) do(method, path string, body []byte) (int, []byte, error) {
	req, err := http.NewRequest(method, a.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json") // else the body is one raw message
	}
	cl := http.Client{Timeout: 30 * time.Second}
	resp, err := cl.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func (a *adminClient) status() (host.Status, error) {
	var st host.Status
	code, b, err := a.do("GET", "/v1/status", nil)
	if err != nil {
		return st, err
	}
	if code != http.StatusOK {
		return st, fmt.Errorf("/v1/status: %d %s", code, b)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("/v1/status: %w", err)
	}
	return st, nil
}

// binding returns a binding's status, ok false when the host does not list it.
func binding(st host.Status, tenant, name string) (host.BindingStatus, bool) {
	for _, tn := range st.Tenants {
		for _, b := range tn.Bindings {
			if tn.Name == tenant && b.Name == name {
				return b, true
			}
		}
	}
	return host.BindingStatus{}, false
}

// until polls cond every 200 ms until it holds; it gives up with cond's last word when the
// container stops or limit passes.
func (a *adminClient) until(what string, limit time.Duration, cond func() (bool, string)) error {
	deadline, last := time.Now().Add(limit), ""
	for {
		ok, s := cond()
		if ok {
			return nil
		}
		last = s
		if a.c.gone() {
			return fmt.Errorf("%s: the container stopped; last: %s", what, last)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not after %s; last: %s", what, limit, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (a *adminClient) waitReady(limit time.Duration) error {
	return a.until("the container's /readyz answering 200", limit, func() (bool, string) {
		code, b, err := a.do("GET", "/readyz", nil)
		return err == nil && code == http.StatusOK, fmt.Sprintf("%d %s %v", code, b, err)
	})
}

// send sends n messages prefix1..prefixN to tenant/queue in one request.
func (a *adminClient) send(tenant, queue, prefix string, n int) error {
	ids := numbered(prefix, n)
	_, err := a.sendIDs(tenant, queue, ids)
	return err
}

func (a *adminClient) sendIDs(tenant, queue string, ids []string) (int, error) {
	type msg struct {
		Body string `json:"body"`
	}
	req := struct {
		Messages []msg `json:"messages"`
	}{}
	for _, id := range ids {
		req.Messages = append(req.Messages, msg{id})
	}
	b, _ := json.Marshal(req)
	code, body, err := a.do("POST", fmt.Sprintf("/v1/tenants/%s/queues/%s/messages", tenant, queue), b)
	if err != nil {
		return 0, fmt.Errorf("send to %s/%s: %w", tenant, queue, err)
	}
	var res struct {
		Sent int `json:"sent"`
	}
	if code != http.StatusOK && code != http.StatusCreated && code != http.StatusAccepted {
		return 0, fmt.Errorf("send to %s/%s: %d %s", tenant, queue, code, body)
	}
	if err := json.Unmarshal(body, &res); err != nil || res.Sent != len(ids) {
		return res.Sent, fmt.Errorf("send to %s/%s: %d %s, want %d sent", tenant, queue, code, body, len(ids))
	}
	return res.Sent, nil
}

// stream sends the healthy tenant's stream — chunks of healthyChunk messages prefix1..,
// one every healthyPace, at least healthyChunks of them and on until more is closed (at most
// maxChunks) — and waits until the steady binding has processed them on top of already
// processed before. It returns the ids the host accepted and the time from the first send to
// the last processed: the stream's length when the host keeps up, more when it falls behind.
// A send refused or a wait given up ends it with an error, what was accepted until then
// returned.
func (a *adminClient) stream(prefix string, already uint64, more <-chan struct{}) ([]string, time.Duration, error) {
	const maxChunks = 10 * healthyChunks
	var sent []string
	start := time.Now()
	for i := 0; i < maxChunks; i++ {
		if i >= healthyChunks && isClosed(more) {
			break
		}
		if d := time.Until(start.Add(time.Duration(i) * healthyPace)); d > 0 {
			time.Sleep(d)
		}
		ids := make([]string, healthyChunk)
		for j := range ids {
			ids[j] = prefix + strconv.Itoa(i*healthyChunk+j+1)
		}
		n, err := a.sendIDs("healthy", "steady", ids)
		sent = append(sent, ids[:n]...)
		if err != nil {
			return sent, time.Since(start), err
		}
	}
	want := already + uint64(len(sent))
	err := a.until(fmt.Sprintf("the healthy binding to process %d messages", want), 3*time.Minute, func() (bool, string) {
		st, err := a.status()
		if err != nil {
			return false, err.Error()
		}
		b, _ := binding(st, "healthy", "steady")
		return b.Processed+b.Poisoned >= want && b.Depth == 0 && b.InFlight == 0,
			fmt.Sprintf("processed %d poisoned %d depth %d in flight %d", b.Processed, b.Poisoned, b.Depth, b.InFlight)
	})
	return sent, time.Since(start), err
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// hostileTenantUp waits until the config reload that added the hostile tenant settled:
// its bindings listed, or the reload refused.
func (a *adminClient) hostileTenantUp(limit time.Duration) error {
	return a.until("the hostile tenant's config reload", limit, func() (bool, string) {
		st, err := a.status()
		if err != nil {
			return false, err.Error()
		}
		if st.LastConfigReloadError != "" {
			return true, ""
		}
		for _, tn := range st.Tenants {
			if tn.Name == "hostile" {
				return len(tn.Bindings) == 4+bigBindings, fmt.Sprintf("%d bindings up", len(tn.Bindings))
			}
		}
		return false, fmt.Sprintf("no hostile tenant yet (bindings up %d of %d)", st.BindingsUp, st.BindingsTotal)
	})
}

// bigDigests returns what says whether each big binding the host lists has reloaded: its
// module digest, reloads and the time of its last reload error.
func (a *adminClient) bigDigests() (map[string]string, error) {
	st, err := a.status()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for i := 0; i <= bigBindings; i++ {
		name := fmt.Sprintf("big%d", i)
		if i == 0 {
			name = "typebomb" // swapped with the big modules' first new version
		}
		if b, ok := binding(st, "hostile", name); ok {
			out[name] = fmt.Sprintf("%s reloads=%d error at %v", b.ModuleDigest, b.Reloads, b.LastReloadErrorAt)
		}
	}
	return out, nil
}

// bigSwapped waits until every big binding listed before swapped its module or failed to;
// none listed (the hostile tenant refused) is nothing to wait for.
func (a *adminClient) bigSwapped(before map[string]string, limit time.Duration) error {
	return a.until("the big modules' hot swap", limit, func() (bool, string) {
		now, err := a.bigDigests()
		if err != nil {
			return false, err.Error()
		}
		for name, was := range before {
			if is, ok := now[name]; ok && is == was {
				return false, name + " not reloaded yet: " + is
			}
		}
		return true, ""
	})
}
