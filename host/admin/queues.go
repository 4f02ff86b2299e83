package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/wqhost/wqhost/host/internal/adminqueue"
	"github.com/wqhost/wqhost/listener/queue"
)

// QueueHost is what the message, dead-letter and job endpoints need of a host besides
// Host; a Host that is not one answers them 501.
type QueueHost interface {
	// Queues opens tenant's queue (its tenant-local name) and its <queue>-poison on the
	// host's own backends. An error IsNotFound classifies is 404.
	Queues(ctx context.Context, tenant, queue string) (Queues, error)
	// Jobs is where redrives run; their contexts end when the host closes.
	Jobs() *adminqueue.Jobs
}

// DepthRefresher is a QueueHost whose status pages show depths its listeners read earlier:
// after a purge or redrive it reads them again, so that what a client shows next is fresh.
type DepthRefresher interface {
	RefreshDepths(ctx context.Context, tenant, queue string)
}

// refresh asks the host, if it can, to read tenant's queue's depths again.
func (s *server) refresh(ctx context.Context, tenant, queue string) {
	if dr, ok := s.h.(DepthRefresher); ok {
		dr.RefreshDepths(ctx, tenant, queue)
	}
}

// Queues are one tenant queue and its dead letters, on a backend the host owns (not to be
// closed).
type Queues struct {
	Queue, Dead queue.Queue
	// MaxMessageBytes is the tenant's limits.max_message_bytes: a larger send is refused.
	MaxMessageBytes int64
}

func (s *server) queueRoutes(mux *http.ServeMux) {
	const q = "/v1/tenants/{tenant}/queues/{queue}"
	mux.HandleFunc("POST "+q+"/messages", s.auth(s.queues(s.send)))
	mux.HandleFunc("GET "+q+"/messages", s.auth(s.queues(s.peek)))
	mux.HandleFunc("GET "+q+"/deadletters", s.auth(s.queues(s.deadList)))
	mux.HandleFunc("GET "+q+"/deadletters/{id}", s.auth(s.queues(s.deadGet)))
	mux.HandleFunc("POST "+q+"/deadletters/count", s.auth(s.queues(s.deadCount)))
	mux.HandleFunc("POST "+q+"/deadletters/redrive", s.auth(s.queues(s.deadRedrive)))
	mux.HandleFunc("POST "+q+"/deadletters/purge", s.auth(s.queues(s.deadPurge)))
	mux.HandleFunc("GET /v1/jobs/{id}", s.auth(s.job))
	mux.HandleFunc("DELETE /v1/jobs/{id}", s.auth(s.job))
}

// queueRequest is a request on one tenant queue, authorized and opened.
type queueRequest struct {
	tenant, queue string
	qs            Queues
	qh            QueueHost
	p             principal
}

// queues checks that p may act on the path's tenant (403 otherwise), that the tenant and
// queue exist (404), and opens them.
func (s *server) queues(next func(w http.ResponseWriter, r *http.Request, q queueRequest)) authedHandler {
	return func(w http.ResponseWriter, r *http.Request, p principal) {
		qh, ok := s.h.(QueueHost)
		if !ok {
			writeError(w, http.StatusNotImplemented, "this host serves no queue operations")
			return
		}
		tenant, qname := r.PathValue("tenant"), r.PathValue("queue")
		if !p.host && p.tenant != tenant {
			writeError(w, http.StatusForbidden, "this token may not act on tenant %q", tenant)
			return
		}
		if !s.h.HasTenant(tenant) {
			writeError(w, http.StatusNotFound, "tenant %q is not configured", tenant)
			return
		}
		peek := r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/messages")
		if strings.HasSuffix(qname, queue.PoisonSuffix) && !peek {
			writeError(w, http.StatusBadRequest, "queue %q: give the original queue; dead letters are under its /deadletters", qname)
			return
		}
		qs, err := qh.Queues(r.Context(), tenant, qname)
		if err != nil {
			code := http.StatusInternalServerError
			if s.h.IsNotFound(err) {
				code = http.StatusNotFound
			}
			writeError(w, code, "%v", err)
			return
		}
		next(w, r, queueRequest{tenant: tenant, queue: qname, qs: qs, qh: qh, p: p})
	}
}

// sendRequest is the JSON form of a send.
type sendRequest struct {
	Messages []struct {
		Body       *string `json:"body"`
		BodyBase64 []byte  `json:"body_base64"`
	} `json:"messages"`
	Delay string `json:"delay"`
	// Order is the ordered execution group (an integer) for a binding with ordered: true.
	Order string `json:"order"`
}

// MaxSendMessages caps the messages of one JSON send.
const MaxSendMessages = 10000

func (s *server) send(w http.ResponseWriter, r *http.Request, q queueRequest) {
	var bodies [][]byte
	var opts queue.SendOptions
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct == "application/json" {
		var req sendRequest
		if err := decodeJSON(r.Body, &req); err != nil {
			writeError(w, http.StatusBadRequest, "body: %v", err)
			return
		}
		if len(req.Messages) == 0 || len(req.Messages) > MaxSendMessages {
			writeError(w, http.StatusBadRequest, "messages: want 1..%d messages, got %d", MaxSendMessages, len(req.Messages))
			return
		}
		for i, m := range req.Messages {
			switch {
			case m.Body != nil && m.BodyBase64 != nil:
				writeError(w, http.StatusBadRequest, "messages[%d]: give body or body_base64, not both", i)
				return
			case m.Body != nil:
				bodies = append(bodies, []byte(*m.Body))
			default:
				bodies = append(bodies, m.BodyBase64)
			}
		}
		if req.Delay != "" {
			d, err := time.ParseDuration(req.Delay)
			if err != nil || d < 0 || d > queue.MaxVisibility {
				writeError(w, http.StatusBadRequest, "delay %.40q: want a duration such as 10s, at most %s", req.Delay, queue.MaxVisibility)
				return
			}
			opts.Delay = d
		}
		if req.Order != "" {
			if _, err := strconv.ParseInt(req.Order, 10, 64); err != nil {
				writeError(w, http.StatusBadRequest, "order %.40q: want an integer group number", req.Order)
				return
			}
			opts.Attributes = map[string]string{queue.AttrOrderKey: req.Order}
		}
	} else {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			writeError(w, http.StatusBadRequest, "reading body: %v", err)
			return
		}
		bodies = [][]byte{b}
	}
	ids, err := adminqueue.SendMessages(r.Context(), q.qs.Queue, q.tenant, bodies, opts, q.qs.MaxMessageBytes)
	var tl *adminqueue.TooLargeError
	switch {
	case errors.As(err, &tl):
		writeError(w, http.StatusRequestEntityTooLarge, "%v", err)
		return
	case errors.Is(err, queue.ErrUnsendable): // the body's fault: the caller's 4xx, not a 500
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	case err != nil:
		writeError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	s.audit(r, q.p, "send", q.tenant+"/"+q.queue, int64(len(ids)))
	writeJSON(w, http.StatusOK, map[string]any{"sent": len(ids), "ids": ids})
}

// intParam reads an integer query parameter in lo..hi; def when absent.
func intParam(r *http.Request, name string, def, lo, hi int64) (int64, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%w: %s=%.40q: want an integer in %d..%d", errBadRequest, name, s, lo, hi)
	}
	return n, nil
}

// MaxPeek caps one peek's page.
const MaxPeek = 1000

func (s *server) peek(w http.ResponseWriter, r *http.Request, q queueRequest) {
	limit, err := intParam(r, "limit", 20, 1, MaxPeek)
	if err == nil {
		var bb int64
		bb, err = intParam(r, "body_bytes", adminqueue.DefaultPreviewBytes, 0, adminqueue.MaxPreviewBytes)
		if err == nil {
			items := []adminqueue.PeekItem{}
			var next string
			next, err = adminqueue.PeekQueue(r.Context(), q.qs.Queue, r.URL.Query().Get("after"), int(limit), bb, func(it adminqueue.PeekItem) error {
				items = append(items, it)
				return nil
			})
			if err == nil {
				writeJSON(w, http.StatusOK, map[string]any{"items": items, "next": next})
				return
			}
		}
	}
	writeQueueError(w, err)
}

// writeQueueError answers a failed queue operation: 400 for the client's mistakes, 409 for
// a purge whose count changed, 500 for the rest.
func writeQueueError(w http.ResponseWriter, err error) {
	var cc *adminqueue.CountChangedError
	switch {
	case errors.As(err, &cc):
		writeJSON(w, http.StatusConflict, map[string]any{"error": err.Error(), "count": cc.Count, "expect": cc.Expect})
	case errors.Is(err, adminqueue.ErrBadQuery), errors.Is(err, queue.ErrBadCursor), errors.Is(err, errBadRequest):
		writeError(w, http.StatusBadRequest, "%v", err)
	default:
		writeError(w, http.StatusInternalServerError, "%v", err)
	}
}

var errBadRequest = errors.New("bad request")

// filterParams reads a dead-letter filter from the query string.
func filterParams(r *http.Request) (adminqueue.Filter, error) {
	v := r.URL.Query()
	f := adminqueue.Filter{Reason: v.Get("reason"), Version: v.Get("version"), Body: v.Get("body")}
	for _, t := range []struct {
		name string
		dst  *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if s := v.Get(t.name); s != "" {
			at, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return f, fmt.Errorf("%w: %s=%.40q: want an RFC 3339 time", errBadRequest, t.name, s)
			}
			*t.dst = at
		}
	}
	return f, nil
}

func (s *server) deadList(w http.ResponseWriter, r *http.Request, q queueRequest) {
	f, err := filterParams(r)
	var limit, bb int64
	if err == nil {
		limit, err = intParam(r, "limit", adminqueue.DefaultPage, 1, adminqueue.MaxPage)
	}
	if err == nil {
		bb, err = intParam(r, "body_bytes", adminqueue.DefaultPreviewBytes, 0, adminqueue.MaxPreviewBytes)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	items, next, err := adminqueue.ListDead(r.Context(), q.qs.Dead, adminqueue.Query{Filter: f, Limit: int(limit), After: r.URL.Query().Get("after"), BodyBytes: bb})
	if err != nil {
		writeQueueError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "next": next})
}

func (s *server) deadGet(w http.ResponseWriter, r *http.Request, q queueRequest) {
	bb, err := intParam(r, "body_bytes", adminqueue.MaxPreviewBytes, 0, adminqueue.MaxPreviewBytes)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	id := r.PathValue("id")
	it, ok, err := adminqueue.GetDead(r.Context(), q.qs.Dead, id, bb)
	switch {
	case err != nil:
		writeQueueError(w, err)
	case !ok:
		writeError(w, http.StatusNotFound, "no dead letter %.80q in %s%s", id, q.queue, queue.PoisonSuffix)
	default:
		writeJSON(w, http.StatusOK, it)
	}
}

// bulkRequest is the body of count, redrive and purge.
type bulkRequest struct {
	Filter adminqueue.Filter `json:"filter"`
	// Rate is a redrive's pace in messages per second (0 = adminqueue.DefaultRate).
	Rate int `json:"rate"`
	// Expect is the count a purge (required) or redrive (optional) was confirmed for.
	Expect *int64 `json:"expect"`
	// Limit, when above 0, takes at most this many of the selected dead letters.
	Limit int64 `json:"limit"`
}

func decodeBulk(r *http.Request) (bulkRequest, error) {
	var req bulkRequest
	if err := decodeJSON(r.Body, &req); err != nil && !errors.Is(err, io.EOF) {
		return req, fmt.Errorf("%w: body: %w", errBadRequest, err)
	}
	if req.Expect != nil && *req.Expect < 0 {
		return req, fmt.Errorf("%w: expect %d: want the count the dry run showed (0 or more)", errBadRequest, *req.Expect)
	}
	if req.Limit < 0 {
		return req, fmt.Errorf("%w: limit %d: want 0 (all) or more", errBadRequest, req.Limit)
	}
	if req.Rate < 0 || req.Rate > adminqueue.MaxRate {
		return req, fmt.Errorf("%w: rate %d: want 0..%d messages per second", errBadRequest, req.Rate, adminqueue.MaxRate)
	}
	return req, nil
}

func (s *server) deadCount(w http.ResponseWriter, r *http.Request, q queueRequest) {
	req, err := decodeBulk(r)
	if err != nil {
		writeQueueError(w, err)
		return
	}
	n, err := adminqueue.CountDead(r.Context(), q.qs.Dead, req.Filter)
	if err != nil {
		writeQueueError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int64{"count": n})
}

func (s *server) deadPurge(w http.ResponseWriter, r *http.Request, q queueRequest) {
	req, err := decodeBulk(r)
	if err == nil && req.Expect == nil {
		err = fmt.Errorf("%w: expect: required, the count the dry run (POST .../deadletters/count) showed", errBadRequest)
	}
	if err != nil {
		writeQueueError(w, err)
		return
	}
	n, err := adminqueue.PurgeDead(r.Context(), q.qs.Dead, req.Filter, *req.Expect, req.Limit)
	s.refresh(r.Context(), q.tenant, q.queue)
	if err != nil {
		writeQueueError(w, err)
		return
	}
	s.audit(r, q.p, "purge-dead-letters", q.tenant+"/"+q.queue, n, "filter", filterText(req.Filter))
	writeJSON(w, http.StatusOK, map[string]int64{"purged": n})
}

func (s *server) deadRedrive(w http.ResponseWriter, r *http.Request, q queueRequest) {
	req, err := decodeBulk(r)
	if err != nil {
		writeQueueError(w, err)
		return
	}
	if req.Expect != nil {
		n, err := adminqueue.CountDead(r.Context(), q.qs.Dead, req.Filter)
		if err != nil {
			writeQueueError(w, err)
			return
		}
		if n != *req.Expect {
			writeQueueError(w, &adminqueue.CountChangedError{Count: n, Expect: *req.Expect})
			return
		}
	}
	id := q.qh.Jobs().Start("redrive", q.tenant, q.queue, func(ctx context.Context, p *adminqueue.Progress) error {
		err := adminqueue.RedriveDead(ctx, q.qs.Dead, q.qs.Queue, req.Filter, req.Rate, req.Limit, p)
		s.log.Info("admin action finished", "actor", q.p.actor(), "action", "redrive-dead-letters", "target", q.tenant+"/"+q.queue,
			"count", p.Done.Load(), "failed", p.Failed.Load(), "matched", p.Matched.Load(), "err", err)
		// Before the job reads as finished: a client that saw it done then sees fresh depths.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		s.refresh(rctx, q.tenant, q.queue)
		return err
	})
	expect := int64(-1)
	if req.Expect != nil {
		expect = *req.Expect
	}
	s.audit(r, q.p, "redrive-dead-letters", q.tenant+"/"+q.queue, expect, "job", id, "filter", filterText(req.Filter))
	writeJSON(w, http.StatusAccepted, map[string]string{"job": id})
}

// job answers GET and DELETE /v1/jobs/{id}. A tenant token sees only its tenant's jobs:
// another tenant's is 404, as one that does not exist.
func (s *server) job(w http.ResponseWriter, r *http.Request, p principal) {
	qh, ok := s.h.(QueueHost)
	if !ok {
		writeError(w, http.StatusNotImplemented, "this host runs no jobs")
		return
	}
	id := r.PathValue("id")
	st, ok := qh.Jobs().Get(id)
	if !ok || !p.host && st.Tenant != p.tenant {
		writeError(w, http.StatusNotFound, "no job %.40q", id)
		return
	}
	if r.Method == http.MethodDelete {
		st, _ = qh.Jobs().Cancel(id)
		s.audit(r, p, "cancel-job", id, st.Done, "kind", st.Kind, "job_target", st.Tenant+"/"+st.Queue, "state", st.State)
	}
	writeJSON(w, http.StatusOK, st)
}
