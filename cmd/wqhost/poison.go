package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"
	"github.com/wqhost/wqhost/host"
	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/listener/queue"
)

const poisonDoc = `
Works on the dead letters of a queue, the messages in <queue>-poison:
  list     shows each one's id, dequeue count, when it was dead-lettered and the reason
           (--json: one object per line, with body_bytes, and the body when at most 4 KiB:
           as text in "body" when valid UTF-8, else in "body_base64", as peek --json)
  requeue  moves them back to <queue> (fresh dequeue count; dead-letter attributes dropped)
  purge    deletes them
Each streams in bounded memory, whatever the queue holds: bodies are not loaded for list
and purge, and move inside the store for requeue (local). --limit N stops after N; a list
cut short by --limit ends with the --after cursor that continues it.
When a host runs on the data directory (<data_dir>/host.json) the command acts through its
admin API (list newest first, requeue as a redrive job, purge with the dry-run count as its
confirmation), so it never contends with the host for the store; otherwise it opens the queue
through the config, as 'wqhost send' does.`

func (c *cli) poison(ctx context.Context, args []string) error {
	fl := c.flags("poison", "list|requeue|purge [--config FILE] [--data-dir DIR] [--tenant T] --queue Q [--limit N] [--after CURSOR]", poisonDoc)
	cfgFile := configFlags(fl)
	tenant := fl.String("tenant", config.DefaultTenant, "tenant that owns the queue")
	qname := fl.String("queue", "", "the queue whose dead letters (<queue>-poison) to work on (required)")
	limit := fl.Int("limit", 0, "at most this many dead letters (0: all)")
	asJSON := fl.Bool("json", false, "list: print one JSON object per line instead of a table")
	after := fl.String("after", "", "list: continue a listing cut short by --limit (the cursor it printed)")
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
	if *qname == "" {
		return usagef("--queue is required")
	}
	if strings.HasSuffix(*qname, queue.PoisonSuffix) {
		return usagef("--queue %s: give the original queue; the command works on its %s queue", *qname, queue.PoisonSuffix)
	}
	if *limit < 0 {
		return usagef("--limit %d: must be 0 (all) or more", *limit)
	}
	cfg, err := c.loadConfig(*cfgFile, fl)
	if err != nil {
		return err
	}
	if _, err := cfg.QueueBackend(*tenant, *qname); err != nil {
		return &usageError{err: err}
	}
	if *after != "" && action != "list" {
		return usagef("--after continues a list; %s works from the start of the queue", action)
	}
	dead := *qname + queue.PoisonSuffix
	more := continueList(fl, *tenant, *qname, *limit, *asJSON)
	if api := c.runningHost(ctx, cfg, *tenant); api != nil {
		return c.poisonThrough(ctx, api, action, *tenant, *qname, host.ListOptions{Limit: *limit, After: *after}, *asJSON, more)
	}
	switch action {
	case "list":
		return c.listDead(ctx, cfg, *tenant, *qname, host.ListOptions{Limit: *limit, After: *after}, *asJSON, more)
	case "requeue":
		n, err := host.RequeueDeadLetters(ctx, cfg, *tenant, *qname, *limit)
		if err != nil {
			return fmt.Errorf("requeue from %s (after %d requeued): %w", dead, n, err)
		}
		fmt.Fprintf(c.stdout, "requeued %d dead letters from %s to %s\n", n, dead, *qname)
		return nil
	default:
		n, err := host.PurgeDeadLetters(ctx, cfg, *tenant, *qname, *limit)
		if err != nil {
			// No "purged 0" on stdout before the error: the count goes with the error.
			return fmt.Errorf("purge %s (after %d purged): %w", dead, n, err)
		}
		fmt.Fprintf(c.stdout, "purged %d dead letters from %s\n", n, dead)
		return nil
	}
}

// continueList returns the line that tells how to continue a list cut short by --limit, given
// the cursor: the same command with --after, keeping the flags that chose the store and the
// host (--config, --data-dir) and --json, so that running it lists the same queue on to its
// end rather than the queue of the same name in ./data.
func continueList(fl *pflag.FlagSet, tenant, qname string, limit int, asJSON bool) func(next string) string {
	var sb strings.Builder
	sb.WriteString("more dead letters follow: wqhost poison list")
	for _, name := range []string{"config", "data-dir"} {
		if f := fl.Lookup(name); f != nil && f.Changed {
			fmt.Fprintf(&sb, " --%s %s", name, shellWord(f.Value.String()))
		}
	}
	fmt.Fprintf(&sb, " --tenant %s --queue %s --limit %d", shellWord(tenant), shellWord(qname), limit)
	if asJSON {
		sb.WriteString(" --json")
	}
	prefix := termSafe(sb.String())
	return func(next string) string { return prefix + " --after " + termSafe(shellWord(next)) + "\n" }
}

// shellWord quotes s for a POSIX shell when it holds anything but plain path characters.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:@%+=,-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// listDead prints the dead letters as they are read, so that listing a large queue holds
// one page at a time.
func (c *cli) listDead(ctx context.Context, cfg *config.Config, tenant, qname string, opts host.ListOptions, asJSON bool, more func(next string) string) error {
	p := c.deadPrinter(asJSON)
	next, err := host.WalkDeadLetters(ctx, cfg, tenant, qname, opts, p.add)
	if ferr := p.tw.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		return err
	}
	p.finish(qname+queue.PoisonSuffix, opts.After != "")
	if next != "" {
		w := c.stdout
		if asJSON {
			w = c.stderr // stdout stays JSON lines
		}
		fmt.Fprint(w, more(next))
	}
	return nil
}

// deadPrinter prints dead letters one at a time: a table aligned listFlush rows at a time,
// or JSON lines. Everything from a guest or a message is escaped for the terminal.
type deadPrinter struct {
	c                *cli
	tw               *tabwriter.Writer
	asJSON           bool
	n, repeats, rows int
}

func (c *cli) deadPrinter(asJSON bool) *deadPrinter {
	return &deadPrinter{c: c, asJSON: asJSON, tw: tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)}
}

func (p *deadPrinter) add(d host.DeadLetter) error {
	if p.asJSON {
		line, err := json.Marshal(d) // the body as text, or body_base64 (offlinepoison.DeadLetter.MarshalJSON)
		if err != nil {
			return err
		}
		p.n++
		_, err = fmt.Fprintf(p.c.stdout, "%s\n", jsonTermSafe(line))
		return err
	}
	if d.Repeats < 0 {
		p.repeats++ // an earlier row shows its original message
		return nil
	}
	if p.n == 0 {
		fmt.Fprintln(p.tw, "ID\tDEQUEUED\tDEAD-LETTERED AT\tORIGINAL ID\tREASON")
	}
	p.n++
	fmt.Fprintf(p.tw, "%s\t%d\t%s\t%s\t%s\n", termSafe(d.ID), d.DequeueCount, termSafe(orDash(d.DeadLetteredAt)), termSafe(orDash(d.OriginalID)), oneLine(d.Reason, 100))
	if p.rows++; p.rows == listFlush {
		p.rows = 0
		return p.tw.Flush()
	}
	return nil
}

// finish prints the table's summary line.
func (p *deadPrinter) finish(dead string, continued bool) {
	if p.asJSON {
		return
	}
	w := p.c.stdout
	switch {
	case p.n == 0 && !continued:
		fmt.Fprintf(w, "no dead letters in %s\n", dead)
	case p.n == 0:
		fmt.Fprintf(w, "no more dead letters in %s\n", dead)
	default:
		fmt.Fprintf(w, "%s in %s", plural(p.n, "dead letter"), dead)
		if p.repeats > 0 {
			fmt.Fprintf(w, ", and %s of messages listed above (requeue moves each message once)", plural(p.repeats, "repeated dead letter"))
		}
		fmt.Fprintln(w)
	}
}

// listFlush is how many table rows are aligned together: a bounded page, not the queue.
const listFlush = 64

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
