package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/wqhost/wqhost/host/config"
)

const statusDoc = `
Asks a running host for GET /v1/status on its admin API and prints one row per binding:
queue, depth, workers, in-flight, processed, failed, retried, poisoned and the module digest.
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
	var doc any
	if err := json.Unmarshal(body, &doc); err != nil {
		return fmt.Errorf("GET %s/v1/status: not JSON: %w", *admin, err)
	}
	rows := bindingRows(doc)
	if len(rows) == 0 {
		fmt.Fprintln(c.stdout, "no bindings")
		return nil
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "TENANT\tBINDING\tQUEUE\tDEPTH\tWORKERS\tIN-FLIGHT\tPROCESSED\tFAILED\tRETRIED\tPOISONED\tMODULE\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.tenant, r.binding, r.queue,
			r.num("depth"), r.num("workers", "active_workers"), r.num("in_flight", "inflight"),
			r.num("processed"), r.num("failed"), r.num("retried"), r.num("poisoned"), shortDigest(r.digest))
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

// statusRow is one binding found in the status document.
type statusRow struct {
	tenant, binding, queue, digest string
	fields                         map[string]any
}

func (r statusRow) num(keys ...string) string {
	for _, k := range keys {
		switch v := r.fields[k].(type) {
		case float64:
			return strconv.FormatFloat(v, 'f', -1, 64)
		case string:
			return v
		}
	}
	return "-"
}

func shortDigest(d string) string {
	d = strings.TrimPrefix(d, "sha256:")
	if len(d) > 12 {
		return d[:12]
	}
	if d == "" {
		return "-"
	}
	return d
}

// bindingRows finds the bindings in a status document: every object with a "queue" string
// is one, its tenant and name taken from its own fields or from where it sits (a map key or
// the enclosing object's name). This reads both a nested tenants → bindings document and a
// flat list of bindings.
func bindingRows(doc any) []statusRow {
	var rows []statusRow
	var walk func(v any, tenant, key string, depth int)
	walk = func(v any, tenant, key string, depth int) {
		switch v := v.(type) {
		case map[string]any:
			if q, ok := v["queue"].(string); ok {
				r := statusRow{tenant: tenant, binding: key, queue: q, fields: v}
				if s, ok := v["tenant"].(string); ok {
					r.tenant = s
				}
				for _, k := range []string{"binding", "name"} {
					if s, ok := v[k].(string); ok {
						r.binding = s
						break
					}
				}
				for _, k := range []string{"module_digest", "digest", "module"} {
					if s, ok := v[k].(string); ok && s != "" {
						r.digest = s
						break
					}
					if m, ok := v[k].(map[string]any); ok {
						if s, ok := m["digest"].(string); ok {
							r.digest = s
							break
						}
					}
				}
				rows = append(rows, r)
				return
			}
			if s, ok := v["tenant"].(string); ok {
				tenant = s
			} else if s, ok := v["name"].(string); ok && depth > 0 {
				tenant = s
			}
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				t := tenant
				if key == "tenants" {
					t = k
				}
				walk(v[k], t, k, depth+1)
			}
		case []any:
			for _, e := range v {
				walk(e, tenant, key, depth+1)
			}
		}
	}
	walk(doc, "", "", 0)
	return rows
}
