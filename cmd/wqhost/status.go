package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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
--json prints the API's JSON unchanged. The bearer token, when the host wants one, is read from
the environment variable named by --token-env.`

func (c *cli) status(ctx context.Context, args []string) error {
	fl := c.flags("status", "[--admin ADDR] [--json] [--token-env NAME]", statusDoc)
	admin := fl.String("admin", config.DefaultAdminAddr, "admin API address (host:port or URL)")
	asJSON := fl.Bool("json", false, "print the raw JSON")
	tokenEnv := fl.String("token-env", "WQHOST_ADMIN_TOKEN", "environment variable holding the admin bearer token")
	timeout := fl.Duration("timeout", 10*time.Second, "give up after this long")
	if err := c.parse(fl, args); err != nil {
		return err
	}
	if fl.NArg() != 0 {
		return usagef("takes no arguments (got %q)", fl.Args())
	}
	body, err := c.adminGet(ctx, *admin, "/v1/status", *tokenEnv, *timeout)
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
		return fmt.Errorf("GET %s: not a status document: %w", adminURL(*admin, "/v1/status"), err)
	}
	return printStatus(c.stdout, st)
}

// printStatus writes one table row per binding.
func printStatus(w io.Writer, st host.Status) error {
	ready := "ready"
	if !st.Ready {
		ready = "not ready"
	}
	up := ""
	if !st.StartedAt.IsZero() {
		up = ", up " + time.Since(st.StartedAt).Round(time.Second).String()
	}
	fmt.Fprintf(w, "host %s%s\n", ready, up)
	if st.LastConfigReloadError != "" {
		fmt.Fprintf(w, "config reload failed%s, the running config stays: %s\n", since(st.LastConfigReloadErrorAt), termSafe(st.LastConfigReloadError))
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
		return nil
	}
	return tw.Flush()
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
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			msg += fmt.Sprintf(" (set the token in $%s)", tokenEnv)
		}
		return nil, fmt.Errorf("GET %s: %s: %s", u, resp.Status, msg)
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
