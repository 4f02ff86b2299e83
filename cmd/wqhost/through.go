package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"
	"unicode/utf8"

	"github.com/wqhost/wqhost/host"
	"github.com/wqhost/wqhost/listener/queue"
)

// The CLI's operations through a running host's admin API (see hostfile.go).

// sendBatchBytes bounds one JSON send through the API (a body above it goes alone).
const sendBatchBytes = 1 << 20

// queuePath is the admin API path of tenant's queue.
func queuePath(tenant, queue string) string {
	return "/v1/tenants/" + url.PathEscape(tenant) + "/queues/" + url.PathEscape(queue)
}

// sendThrough sends src's bodies through the running host's API, sendChunk messages (at
// most about sendBatchBytes) per request.
func (c *cli) sendThrough(ctx context.Context, api *adminClient, tenant, qname string, src *bodySource, delay time.Duration, order string) error {
	type msg struct {
		Body       *string `json:"body,omitempty"`
		BodyBase64 []byte  `json:"body_base64,omitempty"`
	}
	type request struct {
		Messages []msg  `json:"messages"`
		Delay    string `json:"delay,omitempty"`
		Order    string `json:"order,omitempty"`
	}
	var answer struct {
		Sent int      `json:"sent"`
		IDs  []string `json:"ids"`
	}
	path := queuePath(tenant, qname) + "/messages"
	req := request{Order: order}
	if delay > 0 {
		req.Delay = delay.String()
	}
	total := src.n
	bar := c.progress(total, "sending to "+qname)
	start := time.Now()
	halt, stopHalt := c.sendHalt()
	defer stopHalt()
	for i := 0; i < total; {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("after %d of %d messages: %w", i, total, err)
		}
		if err := halted(halt, i, total, qname); err != nil {
			return err
		}
		req.Messages = req.Messages[:0]
		size := 0
		for i+len(req.Messages) < total && len(req.Messages) < sendChunk {
			b := src.body(i + len(req.Messages))
			n, text := jsonSize(b)
			if len(req.Messages) > 0 && size+n > sendBatchBytes {
				break
			}
			size += n
			if text {
				s := string(b)
				req.Messages = append(req.Messages, msg{Body: &s})
			} else {
				req.Messages = append(req.Messages, msg{BodyBase64: b})
			}
		}
		if err := api.call(ctx, http.MethodPost, path, req, &answer); err != nil {
			return fmt.Errorf("after %d of %d messages: %w", i, total, err)
		}
		i += len(req.Messages)
		bar.Add(len(req.Messages))
	}
	bar.Finish()
	if total == 1 && len(answer.IDs) == 1 {
		fmt.Fprintf(c.stdout, "sent message %s to %s (through the running host)\n", termSafe(answer.IDs[0]), qname)
		return nil
	}
	el := time.Since(start)
	fmt.Fprintf(c.stdout, "sent %d messages to %s in %s (%.0f msg/s, through the running host)\n", total, qname, el.Round(time.Millisecond), float64(total)/el.Seconds())
	return nil
}

// jsonSize is how large b is in a JSON send, and whether it goes as text: UTF-8 whose
// escapes (control characters, quotes, backslashes and the HTML characters encoding/json
// escapes, 6 bytes each) keep it no larger than base64; otherwise base64. Either way a body
// at the tenant's limit fits the API's request limit (the limit as base64, and 64 KiB).
func jsonSize(b []byte) (int, bool) {
	b64 := base64.StdEncoding.EncodedLen(len(b))
	if !utf8.Valid(b) {
		return b64, false
	}
	n := len(b)
	for _, c := range b {
		if c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			n += 5
		}
	}
	// U+2028 and U+2029 (3 bytes each) are escaped too, as 6.
	n += 3 * (bytes.Count(b, []byte("\u2028")) + bytes.Count(b, []byte("\u2029")))
	if n > b64 {
		return b64, false
	}
	return n, true
}

// jobStatus is GET /v1/jobs/{id}'s answer.
type jobStatus struct {
	State   string `json:"state"`
	Matched int64  `json:"matched"`
	Done    int64  `json:"done"`
	Failed  int64  `json:"failed"`
	Error   string `json:"error"`
}

// requeueThrough redrives up to limit (0: all) dead letters through the API, as fast as
// the host allows, and waits for the job.
func (c *cli) requeueThrough(ctx context.Context, api *adminClient, tenant, qname string, limit int) (int64, error) {
	var j struct{ Job string }
	body := map[string]any{"rate": 100000, "limit": limit}
	if err := api.call(ctx, http.MethodPost, queuePath(tenant, qname)+"/deadletters/redrive", body, &j); err != nil {
		return 0, err
	}
	for {
		var st jobStatus
		if err := api.call(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(j.Job), nil, &st); err != nil {
			return 0, err
		}
		switch st.State {
		case "running":
		case "done":
			if st.Failed > 0 {
				return st.Done, fmt.Errorf("%d dead letters could not be moved (leased by another reader)", st.Failed)
			}
			return st.Done, nil
		default:
			return st.Done, fmt.Errorf("redrive job %s %s: %s", j.Job, st.State, termSafe(st.Error))
		}
		select {
		case <-ctx.Done():
			// Stop the job too: an interrupted requeue must not go on behind the user's back.
			_ = api.call(context.WithoutCancel(ctx), http.MethodDelete, "/v1/jobs/"+url.PathEscape(j.Job), nil, nil)
			return st.Done, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// purgeThrough purges up to limit (0: all) dead letters through the API: it counts them
// (the dry run), then purges with that count as the confirmation, counting again when
// dead letters arrived meanwhile (409).
func (c *cli) purgeThrough(ctx context.Context, api *adminClient, tenant, qname string, limit int) (int64, error) {
	base := queuePath(tenant, qname) + "/deadletters"
	for attempt := 0; ; attempt++ {
		var n struct{ Count int64 }
		if err := api.call(ctx, http.MethodPost, base+"/count", map[string]any{}, &n); err != nil {
			return 0, err
		}
		var p struct{ Purged int64 }
		err := api.call(ctx, http.MethodPost, base+"/purge", map[string]any{"expect": n.Count, "limit": limit}, &p)
		var ae *apiError
		if errors.As(err, &ae) && ae.code == http.StatusConflict && attempt < 5 {
			continue
		}
		return p.Purged, err
	}
}

// poisonThrough runs a poison action through the running host's API.
func (c *cli) poisonThrough(ctx context.Context, api *adminClient, action, tenant, qname string, opts host.ListOptions, asJSON bool, more func(next string) string) error {
	dead := qname + queue.PoisonSuffix
	switch action {
	case "requeue":
		n, err := c.requeueThrough(ctx, api, tenant, qname, opts.Limit)
		if err != nil {
			return fmt.Errorf("requeue from %s (after %d requeued): %w", dead, n, err)
		}
		fmt.Fprintf(c.stdout, "requeued %d dead letters from %s to %s\n", n, dead, qname)
		return nil
	case "purge":
		n, err := c.purgeThrough(ctx, api, tenant, qname, opts.Limit)
		if err != nil {
			return fmt.Errorf("purge %s (after %d purged): %w", dead, n, err)
		}
		fmt.Fprintf(c.stdout, "purged %d dead letters from %s\n", n, dead)
		return nil
	}
	p := c.deadPrinter(asJSON)
	after, n := opts.After, 0
	var next string
	for {
		page := maxPeekPage
		if opts.Limit > 0 {
			page = min(page, opts.Limit-n)
		}
		var ans struct {
			Items []host.DeadLetterItem `json:"items"`
			Next  string                `json:"next"`
		}
		path := fmt.Sprintf("%s/deadletters?limit=%d&body_bytes=%d&after=%s", queuePath(tenant, qname), page, host.ListBodyBytes, url.QueryEscape(after))
		if err := api.call(ctx, http.MethodGet, path, nil, &ans); err != nil {
			_ = p.tw.Flush()
			return err
		}
		for _, it := range ans.Items {
			if err := p.add(host.DeadLetterOfItem(it)); err != nil {
				return err
			}
			n++
		}
		next = ans.Next
		if next == "" || opts.Limit > 0 && n >= opts.Limit {
			break
		}
		after = next
	}
	if err := p.tw.Flush(); err != nil {
		return err
	}
	p.finish(dead, opts.After != "")
	if next != "" {
		w := c.stdout
		if asJSON {
			w = c.stderr
		}
		fmt.Fprint(w, more(next))
	}
	return nil
}
