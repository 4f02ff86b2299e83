package main

import (
	"context"
	"fmt"
	"io"
	"os/exec"
)

// cmdTinyGo runs BenchmarkTinyGo (tinygo_test.go) through the go command in the working
// directory, which `go run .` and `wqhost bench` make this module's: the comparison is a Go
// benchmark, so that its figures come with go test's own timing, and this command is its
// door from the command line. The benchmark's last lines are the ratios docs/benchmarks.md
// quotes, such as "tinygo vowels end to end vs extism: R×".
func cmdTinyGo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("tinygo", "Runs BenchmarkTinyGo (go test -run '^$' -bench TinyGo .): the TinyGo handlers against Extism\nper call and end to end, and the pooled no-op against a raw wazero call; prints the ratios.", stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", "TinyGo", ".")
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go test -bench TinyGo: %w", err)
	}
	return nil
}
