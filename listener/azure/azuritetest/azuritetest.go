// Package azuritetest starts Microsoft's Azurite storage emulator (the queue service only) for
// tests: on a free loopback port, with its data in a temporary directory, from the copy pinned
// in tools/azurite (installed with `npm ci`).
//
// Without node or the installed emulator, Start skips the test with a message saying how to
// install it; when CI=true it fails instead, so CI never silently skips the Azure tests.
package azuritetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Azurite's well-known development account (public, documented by Microsoft; not a secret).
const (
	AccountName = "devstoreaccount1"
	AccountKey  = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// ErrUnavailable is returned by StartServer when node or the pinned Azurite is not installed.
var ErrUnavailable = errors.New("azurite unavailable")

// InstallHint tells a developer how to get the emulator the tests need.
const InstallHint = "install Node.js and run `npm ci` in tools/azurite (or set WQHOST_AZURITE_DIR to a directory holding node_modules/azurite)"

// Options tune StartServer.
type Options struct {
	// InMemory keeps Azurite's data in memory instead of the temporary directory. Restart
	// then loses every queue and message.
	InMemory bool
	// Log receives Azurite's stdout and stderr; nil discards them.
	Log io.Writer
}

// Server is a running (or stopped) Azurite queue service.
type Server struct {
	node, main string
	dir        string
	port       int
	opts       Options
	ownDir     bool

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts Azurite for one test and stops it when the test ends. It skips the test when
// the emulator is unavailable, unless CI=true, where it fails.
func Start(t testing.TB) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := StartServer(ctx, Options{})
	if err != nil {
		SkipOrFail(t, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("stop azurite: %v", err)
		}
	})
	return s
}

// SkipOrFail ends t because of err from StartServer: a skip naming InstallHint when the
// emulator is unavailable and CI is not "true", a failure otherwise.
func SkipOrFail(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, ErrUnavailable) && os.Getenv("CI") != "true" {
		t.Skipf("skipping Azure Queue Storage test: %v; %s", err, InstallHint)
	}
	t.Fatalf("start azurite: %v", err)
}

// Locate returns the node binary and Azurite's queue entry point, or an error wrapping
// ErrUnavailable. The emulator is looked for in $WQHOST_AZURITE_DIR, else in tools/azurite
// of the enclosing Go module.
func Locate() (node, main string, err error) {
	node, err = exec.LookPath("node")
	if err != nil {
		return "", "", fmt.Errorf("%w: node not found in PATH", ErrUnavailable)
	}
	dir := os.Getenv("WQHOST_AZURITE_DIR")
	if dir == "" {
		dir, err = ToolsDir()
		if err != nil {
			return "", "", err
		}
	}
	main = filepath.Join(dir, "node_modules", "azurite", "dist", "src", "queue", "main.js")
	if _, err := os.Stat(main); err != nil {
		return "", "", fmt.Errorf("%w: %s missing", ErrUnavailable, main)
	}
	return node, main, nil
}

// ToolsDir returns the repository's tools/azurite directory (package.json, the interop
// script, node_modules), found by walking up from the working directory to go.mod.
func ToolsDir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("%w: working directory: %v", ErrUnavailable, err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, "tools", "azurite"), nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("%w: no go.mod above %s", ErrUnavailable, wd)
		}
	}
}

// StartServer starts Azurite's queue service on a free loopback port with a new temporary
// data directory and waits until it accepts connections. Close stops it and removes the
// directory.
func StartServer(ctx context.Context, opts Options) (*Server, error) {
	node, main, err := Locate()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "wqhost-azurite-")
	if err != nil {
		return nil, fmt.Errorf("azurite data directory: %w", err)
	}
	s := &Server{node: node, main: main, dir: dir, opts: opts, ownDir: true}
	// The port is picked by binding :0 and releasing it, so another process may grab it
	// before Azurite does; a few attempts make that race harmless.
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		s.port, err = freePort()
		if err != nil {
			lastErr = err
			continue
		}
		if lastErr = s.start(ctx); lastErr == nil {
			return s, nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	os.RemoveAll(dir)
	return nil, lastErr
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return fmt.Errorf("azurite on port %d already running", s.port)
	}
	args := []string{s.main,
		"--queueHost", "127.0.0.1", "--queuePort", strconv.Itoa(s.port),
		"--skipApiVersionCheck", // the Go and JS SDKs may speak a newer API version than Azurite knows
		"--loose", "--disableTelemetry",
	}
	if s.opts.InMemory {
		args = append(args, "--inMemoryPersistence") // exclusive with --location
	} else {
		args = append(args, "--location", s.dir)
	}
	if s.opts.Log == nil {
		args = append(args, "--silent")
	}
	cmd := exec.Command(s.node, args...)
	cmd.Dir = s.dir
	cmd.SysProcAttr = procAttr()
	// Keep the start-up output for the error message if Azurite exits early.
	var early bytes.Buffer
	out := io.Writer(&lockedWriter{w: &early, limit: 4096})
	if s.opts.Log != nil {
		out = io.MultiWriter(out, s.opts.Log)
	}
	cmd.Stdout, cmd.Stderr = out, out
	// The parent-death signal (procAttr) follows the OS thread that started the child, so
	// that thread stays locked to this goroutine, and alive, until Azurite exits.
	done := make(chan struct{})
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(done)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("start azurite: %w", err)
	}
	addr := s.addr()
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			s.cmd, s.done = cmd, done
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("azurite exited before listening on %s: %v: %s", addr, cmd.ProcessState, bytes.TrimSpace(early.Bytes()))
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			<-done
			return fmt.Errorf("azurite did not listen on %s: %w", addr, ctx.Err())
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// Stop stops the emulator and keeps its data directory and port for Restart. Connections
// to it are refused until then, which is how tests simulate a storage outage.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return nil
	}
	cmd, done := s.cmd, s.done
	s.cmd, s.done = nil, nil
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
	// Azurite may leave the listening socket to its children for a moment; wait until the
	// port is really closed so "stopped" means connections are refused.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", s.addr(), 100*time.Millisecond)
		if err != nil {
			return nil
		}
		c.Close()
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("azurite still accepting connections on %s after stop", s.addr())
}

// Restart starts the emulator again on the same port and data directory (a stopped or
// running one: a running one is stopped first).
func (s *Server) Restart(ctx context.Context) error {
	if err := s.Stop(); err != nil {
		return err
	}
	return s.start(ctx)
}

// Close stops the emulator and removes its data directory.
func (s *Server) Close() error {
	err := s.Stop()
	if s.ownDir {
		if rerr := os.RemoveAll(s.dir); rerr != nil && err == nil {
			err = fmt.Errorf("remove azurite data directory: %w", rerr)
		}
	}
	return err
}

func (s *Server) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Port returns the loopback port the emulator listens on.
func (s *Server) Port() int { return s.port }

// Dir returns the emulator's data directory.
func (s *Server) Dir() string { return s.dir }

// ServiceURL returns the queue service URL of the development account, path-style as
// Azurite expects: http://127.0.0.1:<port>/devstoreaccount1.
func (s *Server) ServiceURL() string {
	return "http://" + s.addr() + "/" + AccountName
}

// ConnectionString returns a connection string for the development account on this server.
func (s *Server) ConnectionString() string {
	return "DefaultEndpointsProtocol=http;AccountName=" + AccountName + ";AccountKey=" + AccountKey +
		";QueueEndpoint=" + s.ServiceURL() + ";"
}

// lockedWriter keeps the first limit bytes written to w; exec's copy goroutines for stdout
// and stderr may write concurrently.
type lockedWriter struct {
	mu    sync.Mutex
	w     *bytes.Buffer
	limit int
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := l.limit - l.w.Len(); room > 0 {
		l.w.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
