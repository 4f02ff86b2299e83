package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/wqhost/wqhost/listener"
)

const poisonDoc = `
Works on the dead letters of a queue, the messages in <queue>-poison:
  list     shows each one's id, dequeue count, reason and when it was dead-lettered
  requeue  moves them back to <queue> (fresh dequeue count; dead-letter attributes dropped)
  purge    deletes them
--id limits requeue and purge (and list) to the given dead-letter ids.`

// poisonLease is how long the command holds dead letters it is looking at; whatever it does
// not move or delete is released at once when it finishes.
const poisonLease = 2 * time.Minute

func (c *cli) poison(ctx context.Context, args []string) error {
	fl := c.flags("poison", "list|requeue|purge [--config FILE] [--data-dir DIR] [--tenant T] --queue Q [--id ID]...", poisonDoc)
	cfgFile := configFlags(fl)
	tenant := fl.String("tenant", "default", "tenant that owns the queue")
	queue := fl.String("queue", "", "the queue whose dead letters (<queue>-poison) to work on (required)")
	ids := fl.StringSlice("id", nil, "only these dead-letter ids (repeatable or comma-separated)")
	asJSON := fl.Bool("json", false, "list: print JSON lines instead of a table")
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
	cfg, err := c.loadConfig(*cfgFile, fl)
	if err != nil {
		return err
	}
	dead, closeDead, err := openQueue(ctx, cfg, *tenant, *queue+listener.PoisonSuffix)
	if err != nil {
		return err
	}
	defer closeDead()
	var orig listener.Queue
	if action == "requeue" {
		q, closeOrig, err := openQueue(ctx, cfg, *tenant, *queue)
		if err != nil {
			return err
		}
		defer closeOrig()
		orig = q
	}
	only := map[string]bool{}
	for _, id := range *ids {
		only[id] = true
	}

	// Lease every dead letter, act on the chosen ones, release the rest. Leasing (not peeking)
	// works on every backend and keeps two operators from requeueing the same message twice.
	var held, chosen []*listener.Message
	defer func() {
		for _, m := range held {
			// Background context: a cancelled command must still hand back what it holds.
			_ = dead.UpdateVisibility(context.Background(), m, 0)
		}
	}()
	for {
		ms, err := dead.Receive(ctx, listener.MaxBatch, poisonLease)
		if err != nil {
			return err
		}
		if len(ms) == 0 {
			break
		}
		for _, m := range ms {
			if len(only) == 0 || only[m.ID] {
				chosen = append(chosen, m)
			} else {
				held = append(held, m)
			}
		}
	}
	for _, m := range chosen {
		delete(only, m.ID)
	}
	if len(only) > 0 {
		missing := slices.Sorted(maps.Keys(only))
		held = append(held, chosen...)
		return fmt.Errorf("no dead letter with id %s in %s%s", strings.Join(missing, ", "), *queue, listener.PoisonSuffix)
	}

	switch action {
	case "list":
		held = append(held, chosen...)
		return c.listDead(chosen, *queue, *asJSON)
	case "requeue":
		var errs []error
		moved := 0
		for i, m := range chosen {
			if _, err := orig.Send(ctx, m.Body, listener.SendOptions{Attributes: requeueAttrs(m.Attributes)}); err != nil {
				held = append(held, chosen[i:]...)
				errs = append(errs, fmt.Errorf("requeue dead letter %s: %w", m.ID, err))
				break
			}
			if err := dead.Delete(ctx, m); err != nil {
				// Sent but still in the poison queue: say so, the operator may purge it.
				errs = append(errs, fmt.Errorf("dead letter %s was requeued but not removed from %s%s: %w", m.ID, *queue, listener.PoisonSuffix, err))
			}
			moved++
		}
		fmt.Fprintf(c.stdout, "requeued %d dead letters from %s%s to %s\n", moved, *queue, listener.PoisonSuffix, *queue)
		return errors.Join(errs...)
	default: // purge
		var errs []error
		purged := 0
		for _, m := range chosen {
			if err := dead.Delete(ctx, m); err != nil {
				errs = append(errs, fmt.Errorf("purge dead letter %s: %w", m.ID, err))
				continue
			}
			purged++
		}
		fmt.Fprintf(c.stdout, "purged %d dead letters from %s%s\n", purged, *queue, listener.PoisonSuffix)
		return errors.Join(errs...)
	}
}

// requeueAttrs keeps a dead letter's own attributes (an order key) and drops the listener's
// dead-letter bookkeeping, which would be stale on the live queue.
func requeueAttrs(a map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		switch k {
		case listener.AttrReason, listener.AttrOriginalID, listener.AttrOriginalQueue,
			listener.AttrDequeueCount, listener.AttrDeadLetteredAt, listener.AttrHandlerVersion:
			continue
		}
		out[k] = v
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// deadLetter is one row of `poison list`.
type deadLetter struct {
	ID             string `json:"id"`
	OriginalID     string `json:"original_id,omitempty"`
	DequeueCount   string `json:"dequeue_count"`
	DeadLetteredAt string `json:"dead_lettered_at,omitempty"`
	HandlerVersion string `json:"handler_version,omitempty"`
	Reason         string `json:"reason"`
	Body           string `json:"body"`
}

func (c *cli) listDead(ms []*listener.Message, queue string, asJSON bool) error {
	rows := make([]deadLetter, len(ms))
	for i, m := range ms {
		a := m.Attributes
		rows[i] = deadLetter{
			ID: m.ID, OriginalID: a[listener.AttrOriginalID], DequeueCount: a[listener.AttrDequeueCount],
			DeadLetteredAt: a[listener.AttrDeadLetteredAt], HandlerVersion: a[listener.AttrHandlerVersion],
			Reason: a[listener.AttrReason], Body: string(m.Body),
		}
		if rows[i].DequeueCount == "" {
			rows[i].DequeueCount = "?"
		}
	}
	if asJSON {
		enc := json.NewEncoder(c.stdout)
		for _, r := range rows {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	if len(rows) == 0 {
		fmt.Fprintf(c.stdout, "no dead letters in %s%s\n", queue, listener.PoisonSuffix)
		return nil
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tDEQUEUED\tDEAD-LETTERED AT\tORIGINAL ID\tREASON")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.ID, r.DequeueCount, orDash(r.DeadLetteredAt), orDash(r.OriginalID), oneLine(r.Reason, 100))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "%d dead letters in %s%s\n", len(rows), queue, listener.PoisonSuffix)
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine keeps a table row on one line: newlines become spaces, long text is cut.
func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > max {
		return string(r[:max-1]) + "…"
	}
	if s == "" {
		return "-"
	}
	return s
}
