// Command wqhost runs and steers the wqhost queue host.
//
//	wqhost run [--config FILE] [--data-dir DIR] [--admin ADDR] [--demo]
//	wqhost send [--config FILE] [--data-dir DIR] [--tenant T] --queue Q [--count N] [--file F | BODY]
//	wqhost status [--admin ADDR] [--json]
//	wqhost poison list|requeue|purge [--config FILE] [--data-dir DIR] [--tenant T] --queue Q
//	wqhost validate FILE.wasm [--abi wqhost/v1|wasi-stdio]
//	wqhost version
//	wqhost bench <run|percall|idle|all|charts> [flags]   (from a source checkout: runs bench/)
//
// Exit codes: 0 success, 1 runtime failure, 2 usage or configuration error.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"

	"github.com/spf13/pflag"
	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/listener/queue"
	"github.com/wqhost/wqhost/runtime"
)

// Exit codes of every subcommand: scripts rely on them.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// usageError is a bad command line or configuration: exit code 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// cli carries the process's streams and environment: commands never reach for os.Stdout
// and friends themselves.
type cli struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	// isTerminal says whether stderr is a terminal (progress bars redraw in place there).
	isTerminal bool
	// halt, when set, stands for SIGINT/SIGTERM in a send of many messages (tests close it);
	// nil listens for the signals.
	halt <-chan struct{}
}

type command struct {
	summary string
	run     func(c *cli, ctx context.Context, args []string) error
}

func commands() map[string]command {
	return map[string]command{
		"run":      {"run the host (or --demo: process the shipped billing sample and exit)", (*cli).run},
		"send":     {"send messages to a queue", (*cli).send},
		"status":   {"show the running host's bindings (admin API /v1/status)", (*cli).status},
		"poison":   {"list, requeue or purge a queue's dead letters", (*cli).poison},
		"validate": {"check a .wasm module against a guest ABI", (*cli).validate},
		"new":      {"write a ready handler project (go, tinygo, rust or extism) that builds anywhere", (*cli).newProject},
		"peek":     {"show messages of any queue (input, output, poison) without consuming them", (*cli).peek},
		"call":     {"run one message through a module and print its verdict, outputs and logs", (*cli).call},
		"version":  {"print the version", (*cli).version},
		"bench":    {"run the benchmark suite against the alternatives (from a source checkout)", (*cli).bench},
	}
}

func main() {
	// A host compiles untrusted modules in a child process: this binary, re-executed.
	runtime.RunCompileChild()
	c := &cli{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv, isTerminal: isTerminal(os.Stderr)}
	os.Exit(c.main(context.Background(), os.Args[1:]))
}

func (c *cli) usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: wqhost <command> [flags]")
	fmt.Fprintln(w, "\nCommands:")
	cmds := commands()
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-9s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'wqhost <command> --help' for a command's flags.")
	fmt.Fprintln(w, "Exit codes: 0 ok, 1 runtime failure, 2 usage or configuration error.")
}

// main runs one command line and returns the exit code.
func (c *cli) main(ctx context.Context, args []string) int {
	if len(args) == 0 {
		c.usage(c.stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "--help", "help":
		c.usage(c.stdout)
		return exitOK
	}
	cmd, ok := commands()[args[0]]
	if !ok {
		fmt.Fprintf(c.stderr, "wqhost: unknown command %q\n\n", args[0])
		c.usage(c.stderr)
		return exitUsage
	}
	return c.exitCode(args[0], cmd.run(c, ctx, args[1:]))
}

func (c *cli) exitCode(name string, err error) int {
	if err == nil || errors.Is(err, pflag.ErrHelp) {
		return exitOK
	}
	var xe *exitCodeError
	if errors.As(err, &xe) {
		return xe.code // the child printed its own error
	}
	fmt.Fprintf(c.stderr, "wqhost %s: %v\n", name, err)
	var ue *usageError
	var ce *config.Error
	var ae *apiError
	if errors.As(err, &ue) || errors.As(err, &ce) || errors.Is(err, queue.ErrBadCursor) || errors.Is(err, queue.ErrUnsendable) ||
		errors.As(err, &ae) && (ae.code == http.StatusBadRequest || ae.code == http.StatusRequestEntityTooLarge) { // the request the arguments made
		return exitUsage
	}
	return exitFailure
}

// flags returns a flag set for a subcommand whose usage line is use and whose help text is
// doc; parse errors come back as usage errors.
func (c *cli) flags(name, use, doc string) *pflag.FlagSet {
	fs := pflag.NewFlagSet("wqhost "+name, pflag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.SortFlags = false
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: wqhost %s %s\n\n%s\n\nFlags:\n%s", name, use, strings.TrimSpace(doc), fs.FlagUsages())
	}
	return fs
}

// parse parses args. --help prints the usage to stdout and returns pflag.ErrHelp (exit 0);
// a bad flag is a usage error (exit 2).
func (c *cli) parse(fs *pflag.FlagSet, args []string) error {
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-h" || a == "--help" {
			fs.SetOutput(c.stdout)
		}
	}
	err := fs.Parse(args)
	if errors.Is(err, pflag.ErrHelp) {
		return err
	}
	if err != nil {
		return &usageError{err: fmt.Errorf("%w (see '%s --help')", err, fs.Name())}
	}
	return nil
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
