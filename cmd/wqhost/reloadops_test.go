package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestConfigReloadFailureVisible: a bad edit of the config file a running host follows is
// seen where an operator looks: wqhost_config_last_reload_successful 0 on /metrics, the
// console's banner, and `wqhost status --config FILE`, which still finds the host from the
// broken file; a good edit sets the metric back to 1 and clears both. A log.level edit
// applies in place.
func TestConfigReloadFailureVisible(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "wqhost.yaml")
	addr := freeAddr(t)
	good := func(level string) string {
		return fmt.Sprintf("data_dir: %s\nadmin: {addr: %q}\nlog: {level: %s}\ntenants:\n  default:\n    bindings:\n      billing: {queue: transactions, output: priced, module: builtin:billing-go}\n",
			filepath.Join(dir, "data"), addr, level)
	}
	write := func(body string) {
		t.Helper()
		tmp := cfgPath + ".tmp"
		if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, cfgPath); err != nil { // as editors and ConfigMaps do
			t.Fatal(err)
		}
	}
	write(good("info"))
	h := startConfigHost(t, dir, addr, cfgPath)
	defer h.stop(syscall.SIGTERM, time.Minute)

	reloadOK := func() string { return metricLine(t, string(h.get("/metrics")), "wqhost_config_last_reload_successful") }
	if v := reloadOK(); v != "1" {
		t.Fatalf("at start wqhost_config_last_reload_successful %s, want 1", v)
	}

	// A bad edit: a queue name the config refuses.
	write(strings.Replace(good("info"), "queue: transactions", "queue: Not_A_Queue", 1))
	waitFor(t, time.Minute, "wqhost_config_last_reload_successful 0 after a bad edit", func() bool { return reloadOK() == "0" })
	console := consoleOverview(t, addr)
	if !strings.Contains(console, `<div id="config-banner" class="banner" aria-live="polite">`) || !strings.Contains(console, "Not_A_Queue") {
		t.Errorf("the console shows no config reload banner naming the problem:\n%s", console)
	}
	r := wq(t, dir, "status", "--config", cfgPath)
	if r.code != 0 || !strings.Contains(r.stdout, "config reload failed") || !strings.Contains(r.stdout, "Not_A_Queue") ||
		!strings.Contains(r.stderr, "does not load") || !strings.Contains(r.stdout, "billing") {
		t.Errorf("status --config on the broken file: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}

	// A good edit, with a log level change, which applies in place.
	write(good("debug"))
	waitFor(t, time.Minute, "wqhost_config_last_reload_successful 1 after a good edit", func() bool { return reloadOK() == "1" })
	if console := consoleOverview(t, addr); !strings.Contains(console, `<div id="config-banner" class="banner" hidden`) {
		t.Errorf("the banner stays after a good reload:\n%s", console)
	}
	if r := wq(t, dir, "status", "--config", cfgPath); r.code != 0 || strings.Contains(r.stdout, "config reload failed") || r.stderr != "" {
		t.Errorf("status --config after the good edit: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(h.logs(), "log level changed") {
		t.Errorf("the log.level edit was not applied:\n%s", h.logs())
	}
}

// startConfigHost starts `wqhost run --config FILE` in dir, whose admin API listens on addr,
// and waits for /readyz.
func startConfigHost(t *testing.T, dir, addr, cfgPath string) *hostProc {
	t.Helper()
	h := &hostProc{t: t, addr: addr, dir: dir, done: make(chan struct{})}
	h.cmd = exec.Command(wqhostBin, "run", "--config", cfgPath)
	h.cmd.Dir = dir
	h.cmd.Env = testEnv()
	h.cmd.Stdout, h.cmd.Stderr = h, h
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { h.err = h.cmd.Wait(); close(h.done) }()
	t.Cleanup(func() {
		select {
		case <-h.done:
		default:
			_ = h.cmd.Process.Kill()
			<-h.done
		}
		if t.Failed() {
			t.Logf("host log:\n%s", h.logs())
		}
	})
	waitFor(t, time.Minute, "host ready", func() bool {
		select {
		case <-h.done:
			t.Fatalf("host exited: %v\n%s", h.err, h.logs())
		default:
		}
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return h
}

// metricLine returns the value of the unlabelled series name in a /metrics text.
func metricLine(t *testing.T, metrics, name string) string {
	t.Helper()
	for _, l := range strings.Split(metrics, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			return v
		}
	}
	t.Fatalf("no %s in /metrics", name)
	return ""
}

// consoleOverview logs in to the console of a host without a token and returns the
// overview page.
func consoleOverview(t *testing.T, addr string) string {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	resp, err := c.PostForm("http://"+addr+"/console/login", url.Values{"token": {""}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("console login and overview: %s\n%s", resp.Status, b)
	}
	return string(b)
}
