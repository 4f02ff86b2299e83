package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// A child's ru_maxrss is at least its parent's peak RSS: os/exec starts it with vfork, and
// the exec records the shared address space's high-water mark in the child's maxrss. A
// test process that has run other tests would show its own peak as the child's. peakRSS
// therefore starts the measured command from a fresh copy of this test binary (small: it
// runs no test), which reports its child's ru_maxrss.

// rssHelperEnv carries the command for the helper (JSON: [file, args...]).
const rssHelperEnv = "WQHOST_TEST_RSS_HELPER"

// rssHelper runs as the helper when this binary was started as one: it runs the command
// with this process's stdio and environment, prints "maxrss <bytes>" on fd 3, and returns
// the command's exit code. ok is false in a normal test run.
func rssHelper() (code int, ok bool) {
	spec := os.Getenv(rssHelperEnv)
	if spec == "" {
		return 0, false
	}
	var argv []string
	if err := json.Unmarshal([]byte(spec), &argv); err != nil || len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "rss helper:", spec, err)
		return 125, true
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = os.Environ()
	err := cmd.Run()
	if _, isExit := err.(*exec.ExitError); err != nil && !isExit {
		fmt.Fprintln(os.Stderr, "rss helper:", err)
		return 125, true
	}
	ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if ru != nil {
		fmt.Fprintf(os.NewFile(3, "rss"), "maxrss %d\n", ru.Maxrss<<10)
	}
	return cmd.ProcessState.ExitCode(), true
}

// peakRSS runs the binary to completion and returns its result and its own peak resident
// set (ru_maxrss, measured by the helper above).
func peakRSS(t *testing.T, dir string, args ...string) (result, int64) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := json.Marshal(append([]string{wqhostBin}, args...))
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command(self)
	cmd.Dir, cmd.Env = dir, append(testEnv(), rssHelperEnv+"="+string(spec))
	cmd.ExtraFiles = []*os.File{w}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	w.Close()
	if _, isExit := err.(*exec.ExitError); err != nil && !isExit {
		t.Fatalf("wqhost %s: %v", strings.Join(args, " "), err)
	}
	var report bytes.Buffer
	_, _ = report.ReadFrom(r)
	f := strings.Fields(report.String())
	if len(f) != 2 || f[0] != "maxrss" {
		t.Fatalf("wqhost %s: no rusage from the helper (%q)\nstderr:\n%s", strings.Join(args, " "), report.String(), errb.String())
	}
	rss, _ := strconv.ParseInt(f[1], 10, 64)
	return result{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}, rss
}
