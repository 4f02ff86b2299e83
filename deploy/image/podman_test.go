package image

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// podmanFlags are the global flags this project's CI needs (scripts/install-podman.sh also
// writes them to containers.conf, with no default ulimits): measured on a machine with
// hybrid cgroups and no systemd, where crun and the systemd cgroup manager fail.
var podmanFlags = []string{"--runtime", "runc", "--cgroup-manager", "cgroupfs"}

// podman runs podman with podmanFlags and args, bounded by ctx; it returns stdout and fails
// the test with stderr on error.
func podman(ctx context.Context, t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, "podman", append(append([]string{}, podmanFlags...), args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("podman %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// lockedRun are the `podman run` flags of a locked-down pod, as the Helm chart's security
// context: the image's non-root user, a read-only root filesystem with a writable data
// directory, no capabilities, no privilege escalation, and the host's network so that the
// test reaches the container over loopback only.
func lockedRun(dataDir string) []string {
	return []string{
		"--read-only", "--network", "host", "--cap-drop", "all", "--security-opt", "no-new-privileges",
		"--user", fmt.Sprintf("%d:%d", UID, GID), "-v", dataDir + ":" + DataDir,
	}
}

// TestImageRunsUnderPodman loads the image into podman and runs it locked down: first the
// demo inside the container (3000 billing transactions, 12 malformed), then the host, fed
// from outside the container: the test sends the same sample with the image's own binary,
// run on this machine, into the data directory it shares with the container, and watches
// the container's admin API over loopback until every message is processed or poisoned;
// then SIGTERM must end the container with exit 0.
func TestImageRunsUnderPodman(t *testing.T) {
	if _, err := exec.LookPath("podman"); err != nil {
		fmt.Println("container demo: skipped: podman not installed (bash scripts/install-podman.sh installs it, as root on Debian)")
		t.Skip("podman not installed")
	}
	if os.Geteuid() != 0 {
		// Rootless podman maps the container's user to a subordinate uid, which could not
		// share the data directory with the test's sender.
		fmt.Println("container demo: skipped: podman runs rootless here (the test runs as root, as scripts/install-podman.sh sets it up)")
		t.Skip("not root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	b := buildOnce(t)
	data, err := os.ReadFile(b.binary)
	if err != nil {
		t.Fatal(err)
	}
	img, err := Assemble(b.opts, data)
	if err != nil {
		t.Fatal(err)
	}
	// podman names an image pulled from a layout after its path, which must be lower case
	// (t.TempDir's holds the test's name).
	tmp, err := os.MkdirTemp("", "wqhost-image-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	dir := filepath.Join(tmp, "layout")
	if err := WriteLayout(dir, "wqhost:test", img); err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(podman(ctx, t, "pull", "-q", "oci:"+dir+":wqhost:test"))
	t.Cleanup(func() {
		_ = exec.Command("podman", append(append([]string{}, podmanFlags...), "rmi", "-f", id)...).Run()
	})

	// The docker-archive build-image writes beside the layout loads under its tag, not the
	// archive's path.
	tag := fmt.Sprintf("wqhost:test-%d", time.Now().UnixNano())
	tarPath := filepath.Join(tmp, "image.tar")
	if err := WriteTarball(tarPath, img, tag); err != nil {
		t.Fatal(err)
	}
	if out := podman(ctx, t, "load", "-i", tarPath); !strings.Contains(out, "localhost/"+tag) {
		t.Errorf("podman load -i %s: %q, want the image named localhost/%s", tarPath, out, tag)
	}
	t.Cleanup(func() {
		_ = exec.Command("podman", append(append([]string{}, podmanFlags...), "rmi", "localhost/"+tag)...).Run()
	})

	// The binary inside says what the image's labels say.
	var labels map[string]string
	if err := json.Unmarshal([]byte(podman(ctx, t, "image", "inspect", "--format", "{{json .Labels}}", id)), &labels); err != nil {
		t.Fatal(err)
	}
	checkVersionOutput(t, podman(ctx, t, "run", "--rm", id, "version"), labels)

	// The demo, inside.
	demoDir := sharedDir(t)
	out := podman(ctx, t, append(append([]string{"run", "--rm"}, lockedRun(demoDir)...), id, "run", "--demo")...)
	processed, poisoned := summaryCount(t, out, "processed"), summaryCount(t, out, "poisoned")
	if processed != 2988 || poisoned != 12 {
		t.Fatalf("demo in the container: processed %d poisoned %d, want 2988 and 12:\n%s", processed, poisoned, out)
	}

	// The host, inside; the messages, from outside.
	hostDir := sharedDir(t)
	admin := freeLoopbackAddr(t)
	name := fmt.Sprintf("wqhost-image-test-%d", time.Now().UnixNano())
	podman(ctx, t, append(append([]string{"run", "-d", "--name", name}, lockedRun(hostDir)...), id, "run", "--admin", admin)...)
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := exec.Command("podman", append(append([]string{}, podmanFlags...), "logs", name)...).CombinedOutput()
			t.Logf("container log:\n%s", logs)
		}
		_ = exec.Command("podman", append(append([]string{}, podmanFlags...), "rm", "-f", "-t", "0", name)...).Run()
	})
	waitFor(ctx, t, "the container's /readyz answering 200 on "+admin, func() (bool, string) {
		code, body := get("http://" + admin + "/readyz")
		return code == http.StatusOK, fmt.Sprintf("%d %s", code, body)
	})
	send := exec.CommandContext(ctx, b.binary, "send", "--data-dir", filepath.Join(hostDir, "data"), "--queue", "transactions",
		"--file", filepath.Join(checkout, "examples/workloads/billing-transactions.jsonl"), "--lines")
	if out, err := send.CombinedOutput(); err != nil {
		t.Fatalf("wqhost send from outside the container: %v\n%s", err, out)
	}
	var st binding
	waitFor(ctx, t, "the container to process the 3000 messages sent from outside", func() (bool, string) {
		st = billingStatus("http://" + admin + "/v1/status")
		return st.Processed+st.Poisoned >= 3000 && st.Depth == 0 && st.InFlight == 0, fmt.Sprintf("%+v", st)
	})
	if st.Processed+st.Poisoned != 3000 || st.Poisoned != 12 {
		t.Errorf("binding billing: processed %d poisoned %d, want 3000 settled of which 12 poisoned", st.Processed, st.Poisoned)
	}
	podman(ctx, t, "stop", "-t", "60", name)
	if code := strings.TrimSpace(podman(ctx, t, "inspect", "--format", "{{.State.ExitCode}}", name)); code != "0" {
		t.Errorf("container exit code %s after SIGTERM, want 0", code)
	}
	fmt.Printf("container demo: processed=%d poisoned=%d (demo inside: processed %d poisoned %d; host inside fed from outside: %d ok, exit 0 on SIGTERM)\n",
		st.Processed+st.Poisoned, st.Poisoned, processed+poisoned, poisoned, st.Processed)
}

// sharedDir is a directory the container's user may write (its data directory).
func sharedDir(t *testing.T) string {
	d := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(d, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o777); err != nil { // past the umask
		t.Fatal(err)
	}
	return d
}

// summaryCount reads "NAME  N" from the demo's summary.
func summaryCount(t *testing.T, out, name string) int {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + name + `\s+(\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("demo summary has no %q line:\n%s", name, out)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func freeLoopbackAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func get(url string) (int, string) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

// binding is the part of /v1/status the test reads.
type binding struct {
	Name      string `json:"name"`
	Depth     int64  `json:"depth"`
	InFlight  int    `json:"in_flight"`
	Processed uint64 `json:"processed"`
	Poisoned  uint64 `json:"poisoned"`
}

func billingStatus(url string) binding {
	code, body := get(url)
	if code != http.StatusOK {
		return binding{}
	}
	var st struct {
		Tenants []struct {
			Bindings []binding `json:"bindings"`
		} `json:"tenants"`
	}
	if json.Unmarshal([]byte(body), &st) != nil {
		return binding{}
	}
	for _, tn := range st.Tenants {
		for _, b := range tn.Bindings {
			if b.Name == "billing" {
				return b
			}
		}
	}
	return binding{}
}

// waitFor polls cond until it holds, failing the test with cond's last word when ctx ends
// or two minutes pass.
func waitFor(ctx context.Context, t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	last := ""
	for {
		ok, s := cond()
		if ok {
			return
		}
		last = s
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("waiting for %s: gave up; last: %s", what, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
