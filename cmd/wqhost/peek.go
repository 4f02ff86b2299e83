package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/wqhost/wqhost/host"
	"github.com/wqhost/wqhost/host/config"
)

const peekDoc = `
Shows the messages of any queue (an input, output or <queue>-poison queue) without consuming
them: id, receives so far, when it was enqueued, when it is next receivable, and the body, with
control characters and invalid UTF-8 escaped so a body cannot drive the terminal. The local and
memory backends show every message (leased and delayed ones too); Azure's PeekMessages shows at
most 32 visible ones. The command reaches the queue through the config, as 'wqhost send' does;
it may run while the host runs.`

// peekJSON is one line of --json: the body as text when it is UTF-8, else base64.
type peekJSON struct {
	host.PeekedMessage
	Body       *string `json:"body,omitempty"`
	BodyBase64 []byte  `json:"body_base64,omitempty"`
}

func (c *cli) peek(ctx context.Context, args []string) error {
	fl := c.flags("peek", "[--config FILE] [--data-dir DIR] [--tenant T] --queue Q [--limit N] [--json]", peekDoc)
	cfgFile := configFlags(fl)
	tenant := fl.String("tenant", config.DefaultTenant, "tenant that owns the queue")
	queue := fl.String("queue", "", "the queue to show, e.g. jobs, jobs-done or jobs-poison (required)")
	limit := fl.Int("limit", 20, "at most this many messages (0: all the backend can show)")
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
	cfg, err := c.loadConfig(*cfgFile, fl)
	if err != nil {
		return err
	}
	if _, err := cfg.QueueBackend(*tenant, *queue); err != nil {
		return &usageError{err: err}
	}
	ms, err := host.PeekMessages(ctx, cfg, *tenant, *queue, *limit)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(c.stdout)
		var errs []error
		for _, m := range ms {
			line := peekJSON{PeekedMessage: m}
			if utf8.Valid(m.Body) {
				s := string(m.Body)
				line.Body = &s
			} else {
				line.BodyBase64 = m.Body
			}
			errs = append(errs, enc.Encode(line))
		}
		return errors.Join(errs...)
	}
	if len(ms) == 0 {
		fmt.Fprintf(c.stdout, "no messages in %s\n", *queue)
		return nil
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tRECEIVED\tENQUEUED\tVISIBLE\tBODY")
	now := time.Now()
	for _, m := range ms {
		vis := "now"
		if m.VisibleAt.After(now) {
			vis = "in " + m.VisibleAt.Sub(now).Round(time.Second).String()
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", termSafe(m.ID), m.DequeueCount, m.InsertedAt.UTC().Format(time.RFC3339), vis, cutBody(m.Body, 120))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "%s shown from %s (not consumed)\n", plural(len(ms), "message"), *queue)
	return nil
}

// cutBody is the body made terminal-safe (termSafe) and cut to about max characters.
func cutBody(b []byte, max int) string {
	s, cut := string(b), false
	if len(s) > max*4 {
		s, cut = s[:max*4], true
	}
	if r := []rune(s); len(r) > max {
		s, cut = string(r[:max]), true
	}
	s = termSafe(s)
	if cut {
		s += fmt.Sprintf("… (%d bytes)", len(b))
	}
	return s
}
