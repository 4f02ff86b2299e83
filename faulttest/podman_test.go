package faulttest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The image under podman, for the tests that must run what a pod runs (TestFaultBudget):
// the OCI image scripts/build-image.sh builds, run by podman with the chart's limits. The
// flags and the skip rule are deploy/image's TestImageRunsUnderPodman's.

// podmanFlags are the global flags this project's CI needs (scripts/install-podman.sh also
// writes them to containers.conf): hybrid cgroups and no systemd, where crun and the systemd
// cgroup manager fail.
var podmanFlags = []string{"--runtime", "runc", "--cgroup-manager", "cgroupfs"}

// needPodman skips the test when podman is missing or runs rootless outside CI, saying why
// in the fault line name's place; in CI (CI=true) it fails instead: scripts/test.sh installs
// podman there.
func needPodman(t *testing.T, name string) {
	t.Helper()
	why := ""
	if _, err := exec.LookPath("podman"); err != nil {
		why = "podman not installed (bash scripts/install-podman.sh installs it, as root on Debian)"
	} else if os.Geteuid() != 0 {
		// Rootless podman maps the container's user to a subordinate uid, which could not
		// read the test's cgroup nor share its directories.
		why = "podman runs rootless here (the test runs as root, as scripts/install-podman.sh sets it up)"
	}
	if why == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s: %s; CI must run it", name, why)
	}
	fmt.Printf("fault %s: skipped: %s\n", name, why)
	t.Skip(why)
}

// podman runs podman with podmanFlags and args, bounded by ctx, and returns its stdout, or
// an error holding its stderr.
func podman(ctx context.Context, args ...string) (string, error) {
	return podmanIn(ctx, "", args...)
}

// podmanIn is podman run in the directory dir ("": the test's). `podman run` needs one of
// its own: the container's monitor (conmon) inherits it and writes a file "oom" there when
// the container meets its memory limit.
func podmanIn(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "podman", append(append([]string{}, podmanFlags...), args...)...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("podman %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

func mustPodman(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := podman(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// buildImage builds the image from the checkout with scripts/build-image.sh (the binary a
// pod runs: static, the example handlers embedded), loads it into podman and returns its
// id; the image is removed at cleanup.
func buildImage(t *testing.T) string {
	t.Helper()
	// podman names an image pulled from a layout after its path, which must be lower case
	// (t.TempDir's holds the test's name).
	tmp, err := os.MkdirTemp("", "wqhost-faulttest-image")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	layout := filepath.Join(tmp, "layout")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "scripts/build-image.sh", "-o", layout, "-name", "wqhost:faulttest")
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/build-image.sh: %v\n%s", err, out)
	}
	id := strings.TrimSpace(mustPodman(t, "pull", "-q", "oci:"+layout+":wqhost:faulttest"))
	t.Cleanup(func() { _, _ = podman(context.Background(), "rmi", "-f", id) })
	return id
}

// container is a detached container the test started; it is removed at cleanup, its log
// kept when the test failed.
type container struct {
	t    *testing.T
	name string
	cg   string // its memory cgroup directory, read by the memory sampler

	mu       sync.Mutex
	peak     uint64 // the cgroup's highest memory use seen (memory.peak, max_usage_in_bytes)
	oomKills uint64 // the cgroup's oom_kill count last read
	stopped  bool   // the cgroup disappeared: the container stopped
	// highest is the highest memory.current sampled and highStat what memory.stat said of
	// it: whether a peak was the Go heap and guests (anon), the page cache (file, which the
	// kernel reclaims before it kills) or the kernel's own.
	highest  uint64
	highStat string
}

// runContainer starts `podman run -d` with args (flags, the image, its arguments) and
// samples its memory cgroup every interval until the container stops.
func runContainer(t *testing.T, interval time.Duration, args ...string) *container {
	t.Helper()
	c := &container{t: t, name: fmt.Sprintf("wqhost-faulttest-%d", time.Now().UnixNano())}
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := podman(context.Background(), "logs", c.name)
			keepLog(t, c.name+".log", logs)
		}
		_, _ = podman(context.Background(), "rm", "-f", "-t", "0", c.name)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := podmanIn(ctx, t.TempDir(), append([]string{"run", "-d", "--name", c.name}, args...)...); err != nil {
		t.Fatal(err)
	}
	path := strings.TrimSpace(mustPodman(t, "inspect", "--format", "{{.State.CgroupPath}}", c.name))
	c.cg = memoryCgroup(path)
	if _, err := os.Stat(c.cg); err != nil {
		t.Fatalf("container %s: its memory cgroup: %v", c.name, err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for c.sample() {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	return c
}

// memoryCgroup is the directory of the memory controller of the cgroup at path (podman's
// State.CgroupPath): unified under cgroup v2, the memory hierarchy's under v1.
func memoryCgroup(path string) string {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return filepath.Join("/sys/fs/cgroup", path)
	}
	return filepath.Join("/sys/fs/cgroup/memory", path)
}

// sample reads the cgroup's peak memory and OOM kills; false once the cgroup is gone.
func (c *container) sample() bool {
	peak, err1 := readCgroupInt(c.cg, "memory.peak", "memory.max_usage_in_bytes")
	kills, err2 := readCgroupKeyed(c.cg, "oom_kill", "memory.events", "memory.oom_control")
	c.mu.Lock()
	defer c.mu.Unlock()
	if err1 != nil || err2 != nil {
		c.stopped = true
		return false
	}
	c.peak = max(c.peak, peak)
	c.oomKills = max(c.oomKills, kills)
	if cur, err := readCgroupInt(c.cg, "memory.current", "memory.usage_in_bytes"); err == nil && cur > c.highest {
		c.highest, c.highStat = cur, memoryStat(c.cg)
	}
	return true
}

// memoryStat is the MiB of the main kinds in the cgroup's memory.stat, or "" if unread.
func memoryStat(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "memory.stat"))
	if err != nil {
		return ""
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if !ok || !slices.Contains([]string{"anon", "file", "kernel", "shmem", "sock", "rss", "cache"}, k) {
			continue
		}
		if n, err := strconv.ParseUint(v, 10, 64); err == nil {
			out = append(out, fmt.Sprintf("%s=%dMiB", k, n>>20))
		}
	}
	return strings.Join(out, " ")
}

// highWater returns the highest memory.current sampled and memory.stat's kinds then.
func (c *container) highWater() (uint64, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.highest, c.highStat
}

// memory returns the peak and the OOM kills sampled so far.
func (c *container) memory() (peak, oomKills uint64) {
	c.sample()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.peak, c.oomKills
}

// gone reports whether the container has stopped (its cgroup is gone).
func (c *container) gone() bool {
	c.sample()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopped
}

// exit stops the container (SIGTERM, then SIGKILL after grace) if it still runs, and
// returns its exit code and whether podman saw it OOM-killed.
func (c *container) exit(grace time.Duration) (code int, oomKilled bool) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), grace+time.Minute)
	defer cancel()
	if _, err := podman(ctx, "stop", "-t", strconv.Itoa(int(grace.Seconds())), c.name); err != nil {
		c.t.Logf("stopping %s: %v", c.name, err)
	}
	out := mustPodman(c.t, "inspect", "--format", "{{.State.ExitCode}} {{.State.OOMKilled}}", c.name)
	if _, err := fmt.Sscanf(out, "%d %t", &code, &oomKilled); err != nil {
		c.t.Fatalf("podman inspect %s: %q: %v", c.name, out, err)
	}
	return code, oomKilled
}

// readCgroupInt reads the first of files that exists in dir as one integer.
func readCgroupInt(dir string, files ...string) (uint64, error) {
	var err error
	for _, f := range files {
		var b []byte
		if b, err = os.ReadFile(filepath.Join(dir, f)); err == nil {
			return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		}
	}
	return 0, err
}

// readCgroupKeyed reads key's value from the first of the "key value" files that exists in
// dir; a file without the key (an old kernel) reads 0.
func readCgroupKeyed(dir, key string, files ...string) (uint64, error) {
	err := errors.New("no file")
	for _, f := range files {
		var b []byte
		if b, err = os.ReadFile(filepath.Join(dir, f)); err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, " "); ok && k == key {
				return strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			}
		}
		return 0, nil
	}
	return 0, err
}
