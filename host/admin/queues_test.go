package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/host/internal/adminqueue"
	"github.com/wqhost/wqhost/internal/clock/clocktest"
	"github.com/wqhost/wqhost/listener/local"
	"github.com/wqhost/wqhost/listener/queue"
)

// queueHost is a Host with tenants a and b whose queues live in one local store.
type queueHost struct {
	store *local.Backend
	clock *clocktest.Fake
	jobs  *adminqueue.Jobs
	limit int64
}

func (h *queueHost) Readiness() Readiness                         { return Readiness{Ready: true} }
func (h *queueHost) Status(context.Context, StatusQuery) any      { return nil }
func (h *queueHost) HasTenant(name string) bool                   { return name == "a" || name == "b" }
func (h *queueHost) Notify(context.Context, string, string) error { return nil }
func (h *queueHost) Reload(context.Context) (any, error)          { return nil, nil }
func (h *queueHost) IsNotFound(err error) bool                    { return strings.Contains(err.Error(), "no such queue") }
func (h *queueHost) Jobs() *adminqueue.Jobs                       { return h.jobs }

func (h *queueHost) Queues(ctx context.Context, tenant, q string) (Queues, error) {
	if q == "missing" {
		return Queues{}, fmt.Errorf("no such queue %q", q)
	}
	base := strings.TrimSuffix(q, queue.PoisonSuffix)
	in, err := h.store.Queue(ctx, tenant+"/"+q)
	if err != nil {
		return Queues{}, err
	}
	dead, err := h.store.Queue(ctx, tenant+"/"+base+queue.PoisonSuffix)
	if err != nil {
		return Queues{}, err
	}
	return Queues{Queue: in, Dead: dead, MaxMessageBytes: h.limit}, nil
}

const hostTok, aTok, bTok = "host-token", "a-token", "b-token"

func newQueueHost(t *testing.T) (*queueHost, http.Handler) {
	t.Helper()
	clk := clocktest.New(time.Now().UTC())
	st, err := local.Open(context.Background(), filepath.Join(t.TempDir(), "q.db"), local.Options{Sync: local.SyncNormal, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &queueHost{store: st, clock: clk, jobs: adminqueue.NewJobs(ctx), limit: 1000}
	t.Cleanup(func() {
		cancel()
		h.jobs.Wait()
		st.Close()
	})
	return h, New(h, Options{Tokens: Tokens{Host: hostTok, Tenants: map[string]string{"a": aTok, "b": bTok}}})
}

// deadLetter puts a dead letter of tenant's jobs queue straight into jobs-poison, a minute
// after the one before.
func (h *queueHost) deadLetter(t *testing.T, tenant, body, reason, version string) string {
	t.Helper()
	h.clock.Advance(time.Minute)
	at := h.clock.Now()
	q, err := h.store.Queue(context.Background(), tenant+"/jobs"+queue.PoisonSuffix)
	if err != nil {
		t.Fatal(err)
	}
	id, err := q.Send(context.Background(), []byte(body), queue.SendOptions{Attributes: map[string]string{
		queue.AttrReason: reason, queue.AttrHandlerVersion: version, queue.AttrDequeueCount: "5",
		queue.AttrDeadLetteredAt: at.Format(time.RFC3339Nano), queue.AttrOriginalQueue: tenant + "/jobs",
		"wqhost.fuel": "1234", "trace": "t-" + body,
	}})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// call sends a request with tok and decodes the JSON answer into out (when not nil),
// failing unless the status is want.
func call(t *testing.T, h http.Handler, tok, method, path string, body any, want int, out any) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		js, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(js)
	}
	req := httptest.NewRequest(method, path, rd)
	if _, raw := body.([]byte); !raw && body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, rec.Code, want, rec.Body)
	}
	if out != nil {
		if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, rec.Body)
		}
	}
}

type deadPage struct {
	Items []adminqueue.Item `json:"items"`
	Next  string            `json:"next"`
}

func ids(items []adminqueue.Item) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.ID)
	}
	return out
}

// TestDeadLetterListing: pages follow each other newest first without gaps or repeats,
// each item carries the recorded fields, every wqhost.* attribute and a preview cut to
// body_bytes; the filters select by reason, version, time and body, and the detail shows one.
func TestDeadLetterListing(t *testing.T) {
	h, api := newQueueHost(t)
	t0 := h.clock.Now()
	var want []string
	for i := range 7 {
		reason, version := "trap: unreachable", "v1"
		if i%2 == 1 {
			reason, version = "timeout after 5s", "v2"
		}
		want = append(want, h.deadLetter(t, "a", fmt.Sprintf(`{"n":%d,"pad":"%s"}`, i, strings.Repeat("x", 200)), reason, version))
	}
	slices.Reverse(want) // newest first
	base := "/v1/tenants/a/queues/jobs/deadletters"
	var got []string
	after := ""
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("listing does not end")
		}
		var p deadPage
		call(t, api, aTok, "GET", base+"?limit=3&body_bytes=10&after="+after, nil, 200, &p)
		for _, it := range p.Items {
			if it.Size < 200 || !it.Truncated || it.Body == nil || len(*it.Body) != 10 {
				t.Errorf("item %s: size %d truncated %v body %v: want the whole size and a 10-byte preview", it.ID, it.Size, it.Truncated, it.Body)
			}
			if it.Attributes["wqhost.fuel"] != "1234" || it.DequeueCount != 5 || it.OriginalQueue != "a/jobs" || it.DeadLetteredAt == "" {
				t.Errorf("item %+v: recorded fields or wqhost.* attributes missing", it)
			}
		}
		got = append(got, ids(p.Items)...)
		if p.Next == "" {
			break
		}
		after = p.Next
	}
	if !slices.Equal(got, want) {
		t.Fatalf("pages listed %v, want %v (newest first, each once)", got, want)
	}
	for _, c := range []struct {
		query string
		n     int
	}{
		{"reason=timeout", 3},
		{"version=v1", 4},
		{"reason=trap&version=v2", 0},
		{"body=%22n%22:4", 1},
		{"since=" + t0.Add(150*time.Second).Format(time.RFC3339Nano), 5},                                                            // dead-lettered at t0+3m..t0+7m
		{"since=" + t0.Add(2*time.Minute).Format(time.RFC3339Nano) + "&until=" + t0.Add(4*time.Minute).Format(time.RFC3339Nano), 2}, // t0+2m, t0+3m
	} {
		var p deadPage
		call(t, api, aTok, "GET", base+"?"+c.query, nil, 200, &p)
		if len(p.Items) != c.n {
			t.Errorf("?%s listed %d, want %d", c.query, len(p.Items), c.n)
		}
	}
	var one adminqueue.Item
	call(t, api, aTok, "GET", base+"/"+want[0], nil, 200, &one)
	if one.Truncated || one.Size != int64(len(*one.Body)) || one.Reason != "trap: unreachable" {
		t.Errorf("detail %+v: want the whole body and the reason", one)
	}
	call(t, api, aTok, "GET", base+"/999999", nil, 404, nil)
	call(t, api, aTok, "GET", base+"?after=bogus", nil, 400, nil)
	call(t, api, aTok, "GET", base+"?since=yesterday", nil, 400, nil)
	call(t, api, aTok, "GET", base+"?limit=100000", nil, 400, nil)
}

// TestDeadLetterPurgeNeedsConfirmedCount: a purge deletes only when the count it is sent is
// the filter's count now (409 with the count otherwise), and only what the filter selects.
func TestDeadLetterPurgeNeedsConfirmedCount(t *testing.T) {
	h, api := newQueueHost(t)
	for i := range 10 {
		reason := "trap"
		if i < 4 {
			reason = "timeout"
		}
		h.deadLetter(t, "a", fmt.Sprint(i), reason, "v1")
	}
	base := "/v1/tenants/a/queues/jobs/deadletters"
	f := map[string]any{"filter": map[string]string{"reason": "timeout"}}
	var c struct{ Count int64 }
	call(t, api, aTok, "POST", base+"/count", f, 200, &c)
	if c.Count != 4 {
		t.Fatalf("dry run counted %d, want 4", c.Count)
	}
	var conflict struct{ Count, Expect int64 }
	call(t, api, aTok, "POST", base+"/purge", map[string]any{"filter": f["filter"], "expect": 3}, 409, &conflict)
	if conflict.Count != 4 {
		t.Errorf("409 says count %d, want 4", conflict.Count)
	}
	call(t, api, aTok, "POST", base+"/purge", map[string]any{"filter": f["filter"]}, 400, nil)
	var p struct{ Purged int64 }
	call(t, api, aTok, "POST", base+"/purge", map[string]any{"filter": f["filter"], "expect": 4}, 200, &p)
	if p.Purged != 4 {
		t.Errorf("purged %d, want 4", p.Purged)
	}
	call(t, api, aTok, "POST", base+"/count", map[string]any{}, 200, &c)
	if c.Count != 6 {
		t.Errorf("%d dead letters left, want the 6 the filter did not select", c.Count)
	}
}

// TestDeadLetterRedrive: a redrive job moves the selected dead letters back to the queue
// with the attributes they came with (the dead-letter bookkeeping dropped), reports its
// progress, and a cancelled one stops.
func TestDeadLetterRedrive(t *testing.T) {
	h, api := newQueueHost(t)
	for i := range 6 {
		h.deadLetter(t, "a", fmt.Sprint("body-", i), []string{"trap", "timeout"}[i%2], "v1")
	}
	base := "/v1/tenants/a/queues/jobs/deadletters"
	var j struct{ Job string }
	call(t, api, aTok, "POST", base+"/redrive", map[string]any{"filter": map[string]string{"reason": "trap"}, "rate": 1000, "expect": 3}, 202, &j)
	st := waitJob(t, api, aTok, j.Job)
	if st.State != adminqueue.JobDone || st.Matched != 3 || st.Done != 3 || st.Failed != 0 {
		t.Fatalf("job %+v: want done with 3 of 3 moved", st)
	}
	in, _ := h.store.Queue(context.Background(), "a/jobs")
	n := 0
	if _, err := in.Select(context.Background(), local.Match{}, local.Page{}, 100, func(r *local.Row) error {
		n++
		if !strings.HasPrefix(string(r.Body), "body-") || r.Attributes["trace"] != "t-"+string(r.Body) || r.Attributes[queue.AttrReason] != "" || r.DequeueCount != 0 {
			t.Errorf("requeued %s: body %q attributes %v dequeues %d: want the original body and attributes", r.ID, r.Body, r.Attributes, r.DequeueCount)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Errorf("%d messages back in the queue, want 3", n)
	}
	call(t, api, aTok, "POST", base+"/redrive", map[string]any{"filter": map[string]string{"reason": "trap"}, "expect": 3}, 409, nil)

	// A slow redrive, cancelled.
	for i := range 20 {
		h.deadLetter(t, "a", fmt.Sprint(i), "slow", "v1")
	}
	call(t, api, aTok, "POST", base+"/redrive", map[string]any{"filter": map[string]string{"reason": "slow"}, "rate": 1}, 202, &j)
	var cancelled adminqueue.JobStatus
	call(t, api, aTok, "DELETE", "/v1/jobs/"+j.Job, nil, 200, &cancelled)
	st = waitJob(t, api, aTok, j.Job)
	if st.State != adminqueue.JobCancelled || st.Done >= 20 {
		t.Errorf("cancelled job %+v: want cancelled before moving all 20", st)
	}
}

func waitJob(t *testing.T, api http.Handler, tok, id string) adminqueue.JobStatus {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var st adminqueue.JobStatus
		call(t, api, tok, "GET", "/v1/jobs/"+id, nil, 200, &st)
		if st.State != adminqueue.JobRunning {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s still running after 20s: %+v", id, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestQueueEndpointsTenantScope: a tenant token cannot read, count, purge, redrive, send
// to or peek another tenant's queues, nor see its jobs; the host token can.
func TestQueueEndpointsTenantScope(t *testing.T) {
	h, api := newQueueHost(t)
	h.deadLetter(t, "b", "secret", "trap", "v1")
	base := "/v1/tenants/b/queues/jobs"
	for _, c := range []struct{ method, path string }{
		{"GET", base + "/deadletters"}, {"GET", base + "/deadletters/1"}, {"POST", base + "/deadletters/count"},
		{"POST", base + "/deadletters/purge"}, {"POST", base + "/deadletters/redrive"},
		{"POST", base + "/messages"}, {"GET", base + "/messages"},
	} {
		call(t, api, aTok, c.method, c.path, map[string]any{"expect": 1}, 403, nil)
	}
	var j struct{ Job string }
	call(t, api, bTok, "POST", base+"/deadletters/redrive", map[string]any{}, 202, &j)
	call(t, api, aTok, "GET", "/v1/jobs/"+j.Job, nil, 404, nil)
	call(t, api, aTok, "DELETE", "/v1/jobs/"+j.Job, nil, 404, nil)
	waitJob(t, api, hostTok, j.Job)
	call(t, api, hostTok, "GET", "/v1/tenants/c/queues/jobs/deadletters", nil, 404, nil)
	call(t, api, hostTok, "GET", "/v1/tenants/a/queues/missing/deadletters", nil, 404, nil)
	call(t, api, "", "GET", base+"/deadletters", nil, 401, nil)
}

// TestSendAndPeek: a raw or JSON send enqueues the messages (a body above the tenant's
// max_message_bytes refused with its size and the limit), and a peek shows each message's
// size with its body cut to body_bytes, without consuming it.
func TestSendAndPeek(t *testing.T) {
	h, api := newQueueHost(t)
	base := "/v1/tenants/a/queues/jobs/messages"
	var s struct {
		Sent int
		IDs  []string
	}
	call(t, api, aTok, "POST", base, []byte("raw body"), 200, &s)
	if s.Sent != 1 || len(s.IDs) != 1 {
		t.Fatalf("raw send answered %+v", s)
	}
	call(t, api, aTok, "POST", base, map[string]any{"messages": []map[string]any{
		{"body": strings.Repeat("é", 100)}, {"body_base64": []byte{0xff, 0, 1}},
	}, "delay": "1h"}, 200, &s)
	if s.Sent != 2 {
		t.Fatalf("JSON send answered %+v", s)
	}
	req := httptest.NewRequest("POST", base, bytes.NewReader(make([]byte, 1001)))
	req.Header.Set("Authorization", "Bearer "+aTok)
	rec := httptest.NewRecorder()
	api.ServeHTTP(rec, req)
	if rec.Code != 413 || !strings.Contains(rec.Body.String(), "1001 bytes") || !strings.Contains(rec.Body.String(), "max_message_bytes (1000 bytes)") {
		t.Errorf("oversized send: %d %s: want 413 naming the size and the limit", rec.Code, rec.Body)
	}
	var p struct {
		Items []adminqueue.PeekItem `json:"items"`
	}
	for range 2 {
		call(t, api, aTok, "GET", base+"?limit=10&body_bytes=11", nil, 200, &p)
	}
	if len(p.Items) != 3 {
		t.Fatalf("peek shows %d messages, want 3 (not consumed)", len(p.Items))
	}
	it := p.Items[1]
	if it.Size != 200 || !it.Truncated || it.Body == nil || *it.Body != strings.Repeat("é", 5) {
		t.Errorf("peek item %+v: want size 200 and 5 whole runes of the body", it)
	}
	if b := p.Items[2]; b.BodyBase64 == nil || b.Body != nil || b.VisibleAt.Before(h.clock.Now().Add(50*time.Minute)) {
		t.Errorf("peek item %+v: want the binary body as base64, visible in an hour", b)
	}
}
