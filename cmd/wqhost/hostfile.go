package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/host/source"
)

// How the CLI finds a host running on its data directory: `wqhost run` writes
// <data_dir>/host.json with its pid and admin address once its admin API listens, and
// removes it when it stops (if it is still its own: a second host on the same directory
// writes its own, and names the first again when it stops before it). send, peek, poison and status read it; when the pid is alive and the
// admin API answers /healthz, they act through the API, so a command beside a busy host
// never contends for the store's write lock (SQLITE_BUSY after the 10 s busy timeout) and
// sees what the host sees. Otherwise they open the store themselves. The bearer token is
// the config's admin.token_env, else the tenant's token_env, else $WQHOST_ADMIN_TOKEN.

// hostFileName is the file under data_dir that names a running host.
const hostFileName = "host.json"

// hostFile is host.json.
type hostFile struct {
	PID     int       `json:"pid"`
	Admin   string    `json:"admin"` // http://host:port of the admin API
	Started time.Time `json:"started"`
}

// writeHostFile writes <dataDir>/host.json naming this process and its admin address, and
// returns the function that removes it (if it still names this process). A host that
// started on the directory earlier and still runs is named again then, rather than left
// unfound: the CLI would open the store beside it.
func writeHostFile(dataDir string, addr net.Addr) (remove func(), err error) {
	path := filepath.Join(dataDir, hostFileName)
	prev, prevErr := readHostFile(dataDir)
	if err := putHostFile(path, hostFile{PID: os.Getpid(), Admin: "http://" + addr.String(), Started: time.Now().UTC()}); err != nil {
		return nil, err
	}
	return func() {
		if hf, err := readHostFile(dataDir); err != nil || hf.PID != os.Getpid() {
			return
		}
		if prevErr == nil && prev.PID != os.Getpid() && alive(prev.PID) && putHostFile(path, prev) == nil {
			return
		}
		_ = os.Remove(path)
	}, nil
}

// putHostFile replaces the host file at path with hf in one rename.
func putHostFile(path string, hf hostFile) error {
	js, err := json.Marshal(hf)
	if err != nil {
		return err
	}
	tmp := path + fmt.Sprintf(".%d.tmp", os.Getpid())
	if err := os.WriteFile(tmp, append(js, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func readHostFile(dataDir string) (hostFile, error) {
	var hf hostFile
	b, err := os.ReadFile(filepath.Join(dataDir, hostFileName))
	if err != nil {
		return hf, err
	}
	if err := json.Unmarshal(b, &hf); err != nil {
		return hf, fmt.Errorf("%s: %w", filepath.Join(dataDir, hostFileName), err)
	}
	return hf, nil
}

// alive reports whether a process with pid exists (EPERM: it exists, another user's).
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// adminClient calls a running host's admin API.
type adminClient struct {
	base, token string
	hc          *http.Client
}

// runningHost returns a client of the host running on cfg's data directory, or nil when
// none runs there (no host.json, its pid gone, or its admin API not answering).
func (c *cli) runningHost(ctx context.Context, cfg *config.Config, tenant string) *adminClient {
	hf, err := readHostFile(cfg.DataDir)
	if err != nil || hf.Admin == "" || !alive(hf.PID) {
		return nil
	}
	a := &adminClient{base: strings.TrimSuffix(hf.Admin, "/"), hc: &http.Client{Timeout: 5 * time.Minute}}
	if c.getenv != nil {
		for _, env := range []string{cfg.Admin.TokenEnv, cfg.Tenants[tenant].TokenEnv, "WQHOST_ADMIN_TOKEN"} {
			if env != "" && c.getenv(env) != "" {
				a.token = c.getenv(env)
				break
			}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := a.call(ctx, http.MethodGet, "/healthz", nil, nil); err != nil {
		return nil
	}
	return a
}

// apiError is an answer of the admin API other than 2xx.
type apiError struct {
	method, url string
	code        int
	msg         string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%s %s: %d %s: %s", e.method, e.url, e.code, http.StatusText(e.code), e.msg)
}

// call sends body (nil, raw []byte, or a value sent as JSON) and decodes a 2xx JSON answer
// into out (when not nil).
func (a *adminClient) call(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	ct := ""
	switch b := body.(type) {
	case nil:
	case []byte:
		rd, ct = bytes.NewReader(b), "application/octet-stream"
	default:
		js, err := json.Marshal(b)
		if err != nil {
			return err
		}
		rd, ct = bytes.NewReader(js), "application/json"
	}
	u := a.base + path
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return err
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var e struct{ Error string }
		msg := strings.TrimSpace(string(b))
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			msg += " (set the host's token in the variable admin.token_env names, or $WQHOST_ADMIN_TOKEN)"
		}
		return &apiError{method: method, url: u, code: resp.StatusCode, msg: termSafe(msg)}
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: %w", method, u, err)
	}
	return nil
}

// locateHost says where the host of the config (--config, --data-dir, the environment) is:
// the admin address in <data_dir>/host.json while its process lives, else the config's
// admin.addr (a host still starting listens there before it writes host.json, and one
// without a data directory in common with this command is still found). A config file that
// does not load still names both, with a warning: the host may be running the previous
// version of the file, and its status says why the new one failed.
func (c *cli) locateHost(file string, fl *pflag.FlagSet) (config.Location, error) {
	opts := config.LoadOptions{File: file, Flags: fl}
	if file != "" {
		data, err := source.ReadFile(file)
		if err != nil {
			return config.Location{}, &usageError{err: fmt.Errorf("config: %w", err)}
		}
		opts.Data = data
	}
	if _, err := c.loadConfig(file, fl); err != nil {
		name := file
		if name == "" {
			name = "the embedded default config"
		}
		lines := strings.Split(err.Error(), "\n")
		for i, l := range lines {
			lines[i] = termSafe(l)
		}
		fmt.Fprintf(c.stderr, "warning: %s does not load; finding its host from its data_dir and admin.addr alone:\n  %s\n",
			termSafe(name), strings.Join(lines, "\n  "))
	}
	loc := config.Locate(opts)
	if hf, err := readHostFile(loc.DataDir); err == nil && hf.Admin != "" && alive(hf.PID) {
		loc.AdminAddr = hf.Admin
	} else if loc.AdminAddr == "off" {
		loc.AdminAddr = config.DefaultAdminAddr
	}
	return loc, nil
}
