package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// benchModule is the module path of the benchmark suite. It is a separate module so that
// the alternatives it measures (Extism, gonum/plot) never become dependencies of wqhost;
// `wqhost bench` therefore runs it from a source checkout instead of linking it in.
const benchModule = "github.com/wqhost/wqhost/bench"

// exitCodeError carries the exit code of a child command that already reported its error.
type exitCodeError struct{ code int }

func (e *exitCodeError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func (c *cli) bench(ctx context.Context, args []string) error {
	dir, err := findBenchDir(c.getenv("WQHOST_REPO"))
	if err != nil {
		if wantsHelp(args) {
			fmt.Fprintf(c.stdout, "Usage: wqhost bench <wqbench command> [flags]\n\n%v\n", err)
			return nil
		}
		return &usageError{err: err}
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("wqhost bench runs the suite with the Go toolchain, and no 'go' is on PATH: %w", err)
	}
	cmd := exec.CommandContext(ctx, goBin, append([]string{"run", "."}, args...)...)
	cmd.Dir = dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.stdin, c.stdout, c.stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() > 0 {
			return &exitCodeError{code: ee.ExitCode()}
		}
		return fmt.Errorf("running the benchmark suite in %s: %w", dir, err)
	}
	return nil
}

func wantsHelp(args []string) bool {
	for _, a := range args {
		if a == "-h" || a == "--help" || a == "help" {
			return true
		}
	}
	return len(args) == 0
}

// findBenchDir returns the bench/ directory of a wqhost checkout: under repo when it is set
// (WQHOST_REPO), else under the working directory or the nearest parent that has one.
func findBenchDir(repo string) (string, error) {
	var starts []string
	if repo != "" {
		starts = []string{repo}
	} else {
		wd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("wqhost bench: finding the working directory: %w", err)
		}
		for d := wd; ; d = filepath.Dir(d) {
			starts = append(starts, d)
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	for _, d := range starts {
		b := filepath.Join(d, "bench")
		if moduleOf(filepath.Join(b, "go.mod")) == benchModule {
			return b, nil
		}
	}
	where := "the working directory or its parents"
	if repo != "" {
		where = "WQHOST_REPO=" + repo
	}
	return "", fmt.Errorf("the benchmark suite needs a wqhost source checkout (no bench/go.mod of %s in %s); "+
		"from a checkout: cd bench && go run . all --out ../docs", benchModule, where)
}

// moduleOf returns the module path declared in a go.mod file, or "" when there is none.
func moduleOf(gomod string) string {
	f, err := os.Open(gomod)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}
