package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"text/tabwriter"
	"time"

	"github.com/wqhost/wqhost/host"
	"github.com/wqhost/wqhost/host/config"
)

const peekDoc = `
Shows the messages of any queue (an input, output or <queue>-poison queue) without consuming
them: id, receives so far, when it was enqueued, when it is next receivable, and the body, with
control characters and invalid UTF-8 escaped so a body cannot drive the terminal. The local and
memory backends show every message (leased and delayed ones too); Azure's PeekMessages shows at
most 32 visible ones. Only --body-bytes of each body is read (on the local store not even from
disk into the command), rows print as they are read, so --limit 0 runs in bounded memory;
--json gives each body's size and whether it was cut. When a host runs on the data directory
(<data_dir>/host.json) the command asks its admin API; otherwise it opens the queue through the
config, as 'wqhost send' does.`

// peekJSON is one line of --json: the body, cut to --body-bytes, as text when it is UTF-8,
// else base64; size is the whole body's, truncated says it was cut.
type peekJSON struct {
	ID           string            `json:"id"`
	DequeueCount int               `json:"dequeue_count"`
	InsertedAt   time.Time         `json:"inserted_at"`
	VisibleAt    time.Time         `json:"visible_at,omitzero"`
	Attributes   map[string]string `json:"attributes,omitempty"`
	Size         int64             `json:"size"`
	host.Preview
}

// Bodies read per message when --body-bytes is not given: a table row shows 120
// characters (at most 4 bytes each), a JSON line up to 4 KiB.
const (
	peekTableBytes = 4 * peekChars
	peekJSONBytes  = 4 << 10
	peekChars      = 120
)

func (c *cli) peek(ctx context.Context, args []string) error {
	fl := c.flags("peek", "[--config FILE] [--data-dir DIR] [--tenant T] --queue Q [--limit N] [--body-bytes B] [--json]", peekDoc)
	cfgFile := configFlags(fl)
	tenant := fl.String("tenant", config.DefaultTenant, "tenant that owns the queue")
	queue := fl.String("queue", "", "the queue to show, e.g. jobs, jobs-done or jobs-poison (required)")
	limit := fl.Int("limit", 20, "at most this many messages (0: all the backend can show)")
	bodyBytes := fl.Int64("body-bytes", 0, "read at most this many bytes of each body (default: 480 for the table, 4096 for --json; through a running host at most 65536)")
	asJSON := fl.Bool("json", false, "print one JSON object per line instead of a table")
	if err := c.parse(fl, args); err != nil {
		return err
	}
	if fl.NArg() != 0 {
		return usagef("unexpected arguments %q (see --help)", fl.Args())
	}
	if *queue == "" {
		return usagef("--queue is required")
	}
	if *limit < 0 {
		return usagef("--limit %d: must be 0 (all) or more", *limit)
	}
	if *bodyBytes < 0 || *bodyBytes > int64(config.MaxMessageBytesCap) {
		return usagef("--body-bytes %d: want 0..%d", *bodyBytes, int64(config.MaxMessageBytesCap))
	}
	if *bodyBytes == 0 {
		*bodyBytes = peekTableBytes
		if *asJSON {
			*bodyBytes = peekJSONBytes
		}
	}
	cfg, err := c.loadConfig(*cfgFile, fl)
	if err != nil {
		return err
	}
	if _, err := cfg.QueueBackend(*tenant, *queue); err != nil {
		return &usageError{err: err}
	}
	p := &peekPrinter{c: c, asJSON: *asJSON, tw: tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0), now: time.Now()}
	if api := c.runningHost(ctx, cfg, *tenant); api != nil {
		err = peekThrough(ctx, api, *tenant, *queue, *limit, *bodyBytes, p.add)
	} else {
		err = host.StreamPeek(ctx, cfg, *tenant, *queue, *limit, *bodyBytes, p.add)
	}
	if ferr := p.tw.Flush(); err == nil {
		err = ferr
	}
	if err != nil || *asJSON {
		return err
	}
	if p.n == 0 {
		fmt.Fprintf(c.stdout, "no messages in %s\n", *queue)
		return nil
	}
	fmt.Fprintf(c.stdout, "%s shown from %s (not consumed)\n", plural(p.n, "message"), *queue)
	return nil
}

// peekThrough pages GET .../messages of a running host into fn.
func peekThrough(ctx context.Context, api *adminClient, tenant, queue string, limit int, bodyBytes int64, fn func(host.PeekItem) error) error {
	after, n := "", 0
	for {
		page := maxPeekPage
		if limit > 0 {
			page = min(page, limit-n)
		}
		var ans struct {
			Items []host.PeekItem `json:"items"`
			Next  string          `json:"next"`
		}
		path := fmt.Sprintf("/v1/tenants/%s/queues/%s/messages?limit=%d&body_bytes=%d&after=%s",
			url.PathEscape(tenant), url.PathEscape(queue), page, min(bodyBytes, host.MaxPreviewBytes), url.QueryEscape(after))
		if err := api.call(ctx, http.MethodGet, path, nil, &ans); err != nil {
			return err
		}
		for _, it := range ans.Items {
			if err := fn(it); err != nil {
				return err
			}
			n++
		}
		if ans.Next == "" || limit > 0 && n >= limit {
			return nil
		}
		after = ans.Next
	}
}

// maxPeekPage is the admin API's largest peek page.
const maxPeekPage = 1000

// peekPrinter prints messages as they are read: table rows aligned listFlush at a time, or
// JSON lines; everything from a message is escaped for the terminal.
type peekPrinter struct {
	c      *cli
	asJSON bool
	tw     *tabwriter.Writer
	now    time.Time
	n      int
}

func (p *peekPrinter) add(m host.PeekItem) error {
	p.n++
	if p.asJSON {
		line, err := json.Marshal(peekJSON{ID: m.ID, DequeueCount: m.DequeueCount, InsertedAt: m.EnqueuedAt, VisibleAt: m.VisibleAt,
			Attributes: m.Attributes, Size: m.Size, Preview: m.Preview})
		if err != nil {
			return err
		}
		// As poison list --json: C1 controls and bidi overrides escaped too.
		_, err = fmt.Fprintf(p.c.stdout, "%s\n", jsonTermSafe(line))
		return err
	}
	if p.n == 1 {
		fmt.Fprintln(p.tw, "ID\tRECEIVED\tENQUEUED\tVISIBLE\tBODY")
	}
	vis := "now"
	if m.VisibleAt.After(p.now) {
		vis = "in " + m.VisibleAt.Sub(p.now).Round(time.Second).String()
	}
	fmt.Fprintf(p.tw, "%s\t%d\t%s\t%s\t%s\n", termSafe(m.ID), m.DequeueCount, m.EnqueuedAt.UTC().Format(time.RFC3339), vis, cutBody(prefixOf(m), m.Size, peekChars))
	if p.n%listFlush == 0 {
		return p.tw.Flush()
	}
	return nil
}

// prefixOf is the body bytes a peeked message carries: read from the store, or the
// preview an admin API answer gave.
func prefixOf(m host.PeekItem) []byte {
	switch {
	case m.Prefix != nil:
		return m.Prefix
	case m.Body != nil:
		return []byte(*m.Body)
	}
	return m.BodyBase64
}

// cutBody is a body's prefix b made terminal-safe (termSafe) and cut to about max
// characters, with the whole body's size when it shows less than all of it.
func cutBody(b []byte, size int64, max int) string {
	s, cut := string(b), int64(len(b)) < size
	if len(s) > max*4 {
		s, cut = s[:max*4], true
	}
	if r := []rune(s); len(r) > max {
		s, cut = string(r[:max]), true
	}
	s = termSafe(s)
	if cut {
		s += fmt.Sprintf("… (%d bytes)", size)
	}
	return s
}
