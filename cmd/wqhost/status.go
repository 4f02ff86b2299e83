package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/wqhost/wqhost/host"
	"github.com/wqhost/wqhost/host/config"
)

const statusDoc = `
Asks a running host for GET /v1/status on its admin API and prints one row per binding:
queue, depth, workers, in-flight, processed, failed, retried, poisoned, the module digest and
the last failed module reload (the old version keeps serving); a failed config reload is shown
above the table.
--tenant shows one tenant's bindings; --limit N (with --offset M) shows N bindings from the
M-th, in tenant and binding order, so a host of 10,000 bindings can be read a page at a time
(the line under the table says how many there are). While the host starts, the first line
says how many of its bindings are up.
--json prints the API's JSON unchanged. The bearer token, when the host wants one, is read from
the environment variable named by --token-env (or the config's admin.token_env).
Without --admin, the command asks the host running on the data directory (--config,
--data-dir: the address it wrote in <data_dir>/host.json), else the config's admin.addr
(127.0.0.1:8480 by default). A config file that fails to load still gives its data_dir and
admin address (a warning says it does not load): status is how one asks a host why its
config reload failed.`

func (c *cli) status(ctx context.Context, args []string) error {
	fl := c.flags("status", "[--admin ADDR | --config FILE | --data-dir DIR] [--tenant T] [--limit N [--offset M]] [--json] [--token-env NAME]", statusDoc)
	admin := fl.String("admin", config.DefaultAdminAddr, "admin API address (host:port or URL; default: the host running on the data directory, else 127.0.0.1:8480)")
	cfgFile := configFlags(fl)
	tenant := fl.String("tenant", "", "show this tenant's bindings only")
	limit := fl.Int("limit", 0, "show at most this many bindings (0: all)")
	offset := fl.Int("offset", 0, "skip this many bindings first (with --limit: the next page)")
	asJSON := fl.Bool("json", false, "print the raw JSON")
	tokenEnv := fl.String("token-env", "WQHOST_ADMIN_TOKEN", "environment variable holding the admin bearer token")
	timeout := fl.Duration("timeout", 10*time.Second, "give up after this long")
	if err := c.parse(fl, args); err != nil {
		return err
	}
	if fl.NArg() != 0 {
		return usagef("takes no arguments (got %q)", fl.Args())
	}
	if *limit < 0 || *offset < 0 {
		return usagef("--limit and --offset must not be negative")
	}
	if !fl.Changed("admin") {
		loc, err := c.locateHost(*cfgFile, fl)
		if err != nil {
			return err
		}
		*admin = loc.AdminAddr
		if !fl.Changed("token-env") && loc.AdminTokenEnv != "" && c.getenv != nil && c.getenv(loc.AdminTokenEnv) != "" {
			*tokenEnv = loc.AdminTokenEnv
		}
	}
	path := statusPath(*tenant, *limit, *offset)
	body, err := c.adminGet(ctx, *admin, path, *tokenEnv, *timeout)
	if err != nil {
		return err
	}
	if *asJSON {
		_, err := c.stdout.Write(body)
		if len(body) > 0 && body[len(body)-1] != '\n' {
			fmt.Fprintln(c.stdout)
		}
		return err
	}
	var st host.Status
	if err := json.Unmarshal(body, &st); err != nil {
		return fmt.Errorf("GET %s: not a status document: %w", adminURL(*admin, path), err)
	}
	return printStatus(c.stdout, st)
}

// statusPath is GET /v1/status with the query the flags ask for.
func statusPath(tenant string, limit, offset int) string {
	q := url.Values{}
	if tenant != "" {
		q.Set("tenant", tenant)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if offset > 0 {
		q.Set("offset", strconv.Itoa(offset))
	}
	if len(q) == 0 {
		return "/v1/status"
	}
	return "/v1/status?" + q.Encode()
}

// printStatus writes one table row per binding, and a line saying which bindings of how
// many the table shows when it is a page.
func printStatus(w io.Writer, st host.Status) error {
	ready := "ready"
	if st.BindingsTotal > 0 { // 0: a host from before the counts
		ready = fmt.Sprintf("ready, %d bindings", st.BindingsTotal)
	}
	switch {
	case !st.Ready && st.BindingsUp < st.BindingsTotal:
		ready = fmt.Sprintf("starting, %d of %d bindings up", st.BindingsUp, st.BindingsTotal)
	case !st.Ready:
		ready = "not ready"
	}
	up := ""
	if !st.StartedAt.IsZero() {
		up = ", up " + time.Since(st.StartedAt).Round(time.Second).String()
	}
	fmt.Fprintf(w, "host %s%s\n", ready, up)
	if st.LastConfigReloadError != "" {
		// The host's error starts with what this line already says; print it once.
		msg := strings.TrimPrefix(st.LastConfigReloadError, "config reload (the running config stays): ")
		fmt.Fprintf(w, "config reload failed%s, the running config stays: %s\n", since(st.LastConfigReloadErrorAt), termSafe(msg))
	}
	n := 0
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tBINDING\tQUEUE\tDEPTH\tWORKERS\tIN-FLIGHT\tPROCESSED\tFAILED\tRETRIED\tPOISONED\tDEAD\tP99 MS\tBREAKER\tMODULE\tRELOAD ERROR")
	for _, t := range st.Tenants {
		for _, b := range t.Bindings {
			n++
			reloadErr := "-"
			if b.LastReloadError != "" {
				reloadErr = termSafe(oneLine(b.LastReloadError, 80)) + since(b.LastReloadErrorAt)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.1f\t%s\t%s\t%s\n", t.Name, b.Name, b.Queue,
				b.Depth, b.Workers, b.InFlight, b.Processed, b.Failed, b.Retried, b.Poisoned, b.DeadLetterDepth,
				b.LatencyP99Ms, breakerText(b.Breaker), shortDigest(b.ModuleDigest), reloadErr)
		}
	}
	if n == 0 {
		fmt.Fprintln(w, "no bindings")
	} else if err := tw.Flush(); err != nil {
		return err
	}
	if p := st.Page; p.Returned < p.Total {
		of := "bindings"
		if p.Tenant != "" {
			of = "bindings of tenant " + termSafe(p.Tenant)
		}
		fmt.Fprintf(w, "showing %d of %d %s from offset %d", p.Returned, p.Total, of, p.Offset)
		if next := p.Offset + p.Returned; p.Returned > 0 && next < p.Total {
			fmt.Fprintf(w, " (next page: --offset %d)", next)
		}
		fmt.Fprintln(w)
	}
	return nil
}

// adminURL accepts host:port, :port or a full URL.
func adminURL(addr, path string) string {
	if strings.HasPrefix(addr, "http://") || strings.HasPrefix(addr, "https://") {
		return strings.TrimSuffix(addr, "/") + path
	}
	if strings.HasPrefix(addr, ":") {
		addr = "127.0.0.1" + addr
	}
	return "http://" + addr + path
}

func (c *cli) adminGet(ctx context.Context, addr, path, tokenEnv string, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if scheme, _, ok := strings.Cut(addr, "://"); ok && scheme != "http" && scheme != "https" {
		return nil, usagef("--admin %q: want host:port or an http:// or https:// URL", addr)
	}
	u := adminURL(addr, path)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, usagef("--admin %q: %v", addr, err)
	}
	if tokenEnv != "" && c.getenv != nil {
		if tok := c.getenv(tokenEnv); tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w (is `wqhost run` running with --admin %s?)", u, err, addr)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		msg := strings.TrimSpace(string(body))
		var e struct{ Error string }
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			msg = e.Error // the API's message, not its JSON
		}
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			msg += fmt.Sprintf(" (set the token in $%s)", tokenEnv)
		}
		return nil, fmt.Errorf("GET %s: %s: %s", u, resp.Status, termSafe(msg))
	}
	return body, nil
}

func shortDigest(d string) string {
	d = strings.TrimPrefix(d, "sha256:")
	if len(d) > 12 {
		return d[:12]
	}
	return orDash(d)
}

// since is " (5m ago)" for a time, "" for none.
func since(at *time.Time) string {
	if at == nil || at.IsZero() {
		return ""
	}
	return " (" + time.Since(*at).Round(time.Second).String() + " ago)"
}

// breakerText shows a binding's circuit breaker: its state, and how often it opened.
func breakerText(b host.BreakerStatus) string {
	state := b.State
	if state == "" {
		state = "-" // a host from before the breaker
	}
	if b.Trips == 0 {
		return state
	}
	return fmt.Sprintf("%s (%d trips)", state, b.Trips)
}
