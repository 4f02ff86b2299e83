package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/wqhost/wqhost/host"
	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/listener"
)

const poisonDoc = `
Works on the dead letters of a queue, the messages in <queue>-poison:
  list     shows each one's id, dequeue count, when it was dead-lettered and the reason
  requeue  moves them back to <queue> (fresh dequeue count; dead-letter attributes dropped)
  purge    deletes them
The command reaches the queue through the config, as 'wqhost send' does; it may run while the
host runs.`

func (c *cli) poison(ctx context.Context, args []string) error {
	fl := c.flags("poison", "list|requeue|purge [--config FILE] [--data-dir DIR] [--tenant T] --queue Q [--limit N]", poisonDoc)
	cfgFile := configFlags(fl)
	tenant := fl.String("tenant", config.DefaultTenant, "tenant that owns the queue")
	queue := fl.String("queue", "", "the queue whose dead letters (<queue>-poison) to work on (required)")
	limit := fl.Int("limit", 0, "at most this many dead letters (0: all)")
	asJSON := fl.Bool("json", false, "list: print one JSON object per line instead of a table")
	if err := c.parse(fl, args); err != nil {
		return err
	}
	if fl.NArg() != 1 {
		return usagef("want one action, list, requeue or purge (got %d arguments)", fl.NArg())
	}
	action := fl.Arg(0)
	if action != "list" && action != "requeue" && action != "purge" {
		return usagef("unknown action %q (want list, requeue or purge)", action)
	}
	if *queue == "" {
		return usagef("--queue is required")
	}
	if strings.HasSuffix(*queue, listener.PoisonSuffix) {
		return usagef("--queue %s: give the original queue; the command works on its %s queue", *queue, listener.PoisonSuffix)
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
	dead := *queue + listener.PoisonSuffix
	switch action {
	case "list":
		ls, err := host.ListDeadLetters(ctx, cfg, *tenant, *queue, *limit)
		if err != nil {
			return err
		}
		return c.listDead(ls, dead, *asJSON)
	case "requeue":
		n, err := host.RequeueDeadLetters(ctx, cfg, *tenant, *queue, *limit)
		if err != nil {
			return fmt.Errorf("requeue from %s (after %d requeued): %w", dead, n, err)
		}
		fmt.Fprintf(c.stdout, "requeued %d dead letters from %s to %s\n", n, dead, *queue)
		return nil
	default:
		n, err := host.PurgeDeadLetters(ctx, cfg, *tenant, *queue, *limit)
		if err != nil {
			// No "purged 0" on stdout before the error: the count goes with the error.
			return fmt.Errorf("purge %s (after %d purged): %w", dead, n, err)
		}
		fmt.Fprintf(c.stdout, "purged %d dead letters from %s\n", n, dead)
		return nil
	}
}

func (c *cli) listDead(ls []host.DeadLetter, dead string, asJSON bool) error {
	if asJSON {
		var errs []error
		for _, d := range ls {
			line, err := json.Marshal(d)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			_, err = fmt.Fprintf(c.stdout, "%s\n", jsonTermSafe(line))
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	}
	if len(ls) == 0 {
		fmt.Fprintf(c.stdout, "no dead letters in %s\n", dead)
		return nil
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tDEQUEUED\tDEAD-LETTERED AT\tORIGINAL ID\tREASON")
	for _, d := range ls {
		reason := oneLine(d.Reason, 100)
		if d.Repeats > 0 {
			reason += fmt.Sprintf(" (dead-lettered %d more times)", d.Repeats)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", termSafe(d.ID), d.DequeueCount, termSafe(orDash(d.DeadLetteredAt)), termSafe(orDash(d.OriginalID)), reason)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "%s in %s\n", plural(len(ls), "dead letter"), dead)
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine keeps a table row on one line: runs of white space become one space, long text
// is cut.
func oneLine(s string, max int) string {
	s = termSafe(strings.Join(strings.Fields(s), " "))
	if r := []rune(s); len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return orDash(s)
}
