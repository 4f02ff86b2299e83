package drain

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoPostgres is returned (wrapped, with why) when no PostgreSQL server can be started
// here: its binaries are not installed, or the process runs as root and there is no
// "postgres" user to run them as.
var ErrNoPostgres = errors.New("PostgreSQL unavailable")

// pgBinDirs are where Debian's postgresql package puts initdb and postgres (not on PATH).
const pgBinDirs = "/usr/lib/postgresql/*/bin"

// Postgres is a throwaway PostgreSQL cluster: initdb in a temporary directory, the server
// on a loopback port, run as the "postgres" user when this process is root (the server
// refuses to run as root). Stop ends it and removes the directory.
type Postgres struct {
	// Version is the server's version string (SHOW server_version).
	Version string
	// Dir holds the cluster's data directory and log.
	Dir  string
	port int
	cmd  *exec.Cmd
	done chan error
	dbs  atomic.Int64
}

// pgBinDir finds the directory holding initdb and postgres: initdb on PATH (its symlinks
// resolved), else the newest of Debian's versioned directories.
func pgBinDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(p), "postgres")); err == nil {
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob(pgBinDirs)
	slices.SortFunc(dirs, func(a, b string) int { return pgMajor(b) - pgMajor(a) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("%w: no initdb on PATH nor in %s (install Debian's postgresql: bash scripts/install-postgres.sh)", ErrNoPostgres, pgBinDirs)
}

// pgMajor is the version number in /usr/lib/postgresql/<major>/bin, 0 if none.
func pgMajor(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// runAs is the process attribute that runs the cluster's programs as "postgres" when this
// process is root, and kills the server if this process dies first.
func runAs() (*syscall.SysProcAttr, *user.User, error) {
	attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() != 0 {
		return attr, nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, nil, fmt.Errorf("%w: running as root and no user %q to run the server as: %v", ErrNoPostgres, "postgres", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	attr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	return attr, u, nil
}

// StartPostgres creates a cluster in a new temporary directory (fsync on, synchronous
// commit on: every commit's WAL flushed before it returns, the defaults) and starts its
// server on a free loopback port, giving initdb 2 minutes and the server 60 s to accept
// connections. bin is the directory of initdb and postgres; empty finds it (PATH, then
// Debian's directories). An error wrapping ErrNoPostgres says why no server can run here.
func StartPostgres(ctx context.Context, bin string) (*Postgres, error) {
	if bin == "" {
		var err error
		if bin, err = pgBinDir(); err != nil {
			return nil, err
		}
	} else if _, err := os.Stat(filepath.Join(bin, "initdb")); err != nil {
		return nil, fmt.Errorf("%w: no initdb in %s", ErrNoPostgres, bin)
	}
	attr, u, err := runAs()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "wqbench-pg-")
	if err != nil {
		return nil, err
	}
	p := &Postgres{Dir: dir}
	if err := p.start(ctx, bin, attr, u); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

func (p *Postgres) start(ctx context.Context, bin string, attr *syscall.SysProcAttr, u *user.User) error {
	if u != nil {
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(p.Dir, uid, gid); err != nil {
			return fmt.Errorf("chown %s to postgres: %w", p.Dir, err)
		}
	}
	data := filepath.Join(p.Dir, "data")
	initCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	initdb := exec.CommandContext(initCtx, filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = attr
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %w: %s", err, lastLines(string(out), 5))
	}
	var last error
	for range 3 { // a port found free can be taken before the server binds it
		if p.port, last = freePort(); last != nil {
			return last
		}
		if last = p.serve(ctx, bin, data, attr); last == nil {
			return nil
		}
	}
	return last
}

// serve starts the server on p.port and waits until it accepts connections.
func (p *Postgres) serve(ctx context.Context, bin, data string, attr *syscall.SysProcAttr) error {
	log, err := os.OpenFile(filepath.Join(p.Dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	p.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", data,
		"-c", "listen_addresses=127.0.0.1", "-c", "port="+strconv.Itoa(p.port), "-c", "unix_socket_directories=",
		"-c", "fsync=on", "-c", "synchronous_commit=on")
	p.cmd.SysProcAttr = attr
	p.cmd.Stdout, p.cmd.Stderr = log, log
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	p.done = make(chan error, 1)
	go func() { p.done <- p.cmd.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		conn, err := pgx.Connect(ctx, p.url("postgres"))
		if err == nil {
			err = conn.QueryRow(ctx, "SHOW server_version").Scan(&p.Version)
			conn.Close(ctx)
			if err == nil {
				return nil
			}
		}
		select {
		case werr := <-p.done:
			p.cmd = nil
			b, _ := os.ReadFile(filepath.Join(p.Dir, "server.log"))
			return fmt.Errorf("postgres exited (%v): %s", werr, lastLines(string(b), 5))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres on port %d not accepting connections within 60 s: %v", p.port, err)
		}
	}
}

func (p *Postgres) url(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", p.port, db)
}

// NewDatabase creates an empty database and returns its connection URL.
func (p *Postgres) NewDatabase(ctx context.Context) (string, error) {
	name := fmt.Sprintf("drain_%d", p.dbs.Add(1))
	conn, err := pgx.Connect(ctx, p.url("postgres"))
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return p.url(name), nil
}

// Stop shuts the server down (fast shutdown, then SIGKILL after 15 s) and removes the
// cluster's directory.
func (p *Postgres) Stop() {
	if p.cmd != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		p.cmd = nil
	}
	os.RemoveAll(p.Dir)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], " | ")
}
