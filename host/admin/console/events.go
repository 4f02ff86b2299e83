package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// status is the part of GET /v1/status the console shows.
type status struct {
	Ready bool `json:"ready"`
	Build struct {
		Version  string `json:"version"`
		Commit   string `json:"commit"`
		Modified bool   `json:"modified"`
	} `json:"build"`
	LastConfigReloadError   string     `json:"last_config_reload_error"`
	LastConfigReloadErrorAt *time.Time `json:"last_config_reload_error_at"`
	Page                    struct {
		Offset   int `json:"offset"`
		Returned int `json:"returned"`
		Total    int `json:"total"`
	} `json:"page"`
	Memory  *hostMemoryStatus `json:"memory"`
	Tenants []struct {
		Name     string          `json:"name"`
		Memory   budgetUsage     `json:"memory"`
		Bindings []bindingStatus `json:"bindings"`
	} `json:"tenants"`
}

type bindingStatus struct {
	Name            string `json:"name"`
	Queue           string `json:"queue"`
	Module          string `json:"module"`
	ModuleDigest    string `json:"module_digest"`
	DeadLetterDepth int64  `json:"dead_letter_depth"`
	Messages        struct {
		Visible int64 `json:"visible"`
		Leased  int64 `json:"leased"`
		Delayed int64 `json:"delayed"`
		Exact   bool  `json:"exact"`
	} `json:"messages"`
	Workers     int    `json:"workers"`
	PeakWorkers int    `json:"peak_workers"`
	InFlight    int    `json:"in_flight"`
	Processed   uint64 `json:"processed"`
	Failed      uint64 `json:"failed"`
	Poisoned    uint64 `json:"poisoned"`
	Reloads     uint64 `json:"reloads"`
	Breaker     struct {
		State string `json:"state"`
		Trips uint64 `json:"trips"`
	} `json:"breaker"`
	LastScaling *struct {
		At      time.Time `json:"at"`
		Depth   int64     `json:"depth"`
		Workers int       `json:"workers"`
		Desired int       `json:"desired"`
	} `json:"last_scaling"`
}

// Row is one binding of the overview, as the page renders it and the stream sends it.
type Row struct {
	Tenant     string  `json:"tenant"`
	Binding    string  `json:"binding"`
	Queue      string  `json:"queue"`
	Module     string  `json:"module"`
	Version    string  `json:"version"` // the serving module's digest, first 12
	Visible    int64   `json:"visible"`
	Leased     int64   `json:"leased"`
	Delayed    int64   `json:"delayed"`
	Dead       int64   `json:"dead"`
	Workers    int     `json:"workers"`
	Scaling    string  `json:"scaling"` // the last scaling decision, in words
	MsgPerSec  float64 `json:"msg_per_sec"`
	FailRate   float64 `json:"failure_rate"`
	Breaker    string  `json:"breaker"`
	Processed  uint64  `json:"processed"`
	Failed     uint64  `json:"failed"`
	ratesKnown bool
}

// Snapshot is what the overview shows at one moment: one event of the stream.
type Snapshot struct {
	At    time.Time `json:"at"`
	Rows  []Row     `json:"rows"`
	Total int       `json:"total"`
	// Memory is the Memory panel: the host's budget (the host's session only) and the
	// budget of each tenant of the page's bindings.
	Memory Memory `json:"memory"`
	// Host is the binary and the config reload state, for the header and the banner.
	Host HostInfo `json:"host"`
}

// rateWindow is how far back the overview's msg/s and failure rate look.
const rateWindow = 10 * time.Second

// sample is one binding's counters at one moment, for rates.
type sample struct {
	at                time.Time
	processed, failed uint64
}

// rates keeps a stream's recent samples per binding (bounded: one per tick over
// rateWindow, for the bindings of one page).
type rates map[string][]sample

// apply sets the rows' msg/s and failure rate from the samples over rateWindow, adding
// theirs; samples of bindings no longer shown are dropped.
func (rt rates) apply(rows []Row, at time.Time) {
	seen := map[string]bool{}
	for i := range rows {
		r := &rows[i]
		k := r.Tenant + "\x00" + r.Binding
		seen[k] = true
		ss := append(rt[k], sample{at, r.Processed, r.Failed})
		for len(ss) > 1 && at.Sub(ss[0].at) > rateWindow {
			ss = ss[1:]
		}
		rt[k] = ss
		first := ss[0]
		dt := at.Sub(first.at).Seconds()
		if dt <= 0 || r.Processed < first.processed || r.Failed < first.failed {
			continue
		}
		dp, df := r.Processed-first.processed, r.Failed-first.failed
		r.MsgPerSec, r.ratesKnown = float64(dp)/dt, true
		if dp+df > 0 {
			r.FailRate = float64(df) / float64(dp+df)
		}
	}
	for k := range rt {
		if !seen[k] {
			delete(rt, k)
		}
	}
}

// overviewPageSize is the bindings an overview page shows (and streams).
const overviewPageSize = 100

// snapshot reads one page of the overview from the API as s.
func (c *Console) snapshot(ctx context.Context, s *session, offset int) (Snapshot, error) {
	var st status
	q := url.Values{"limit": {strconv.Itoa(overviewPageSize)}, "offset": {strconv.Itoa(offset)}}
	if err := c.getJSON(ctx, s, "/v1/status?"+q.Encode(), &st); err != nil {
		return Snapshot{}, err
	}
	snap := Snapshot{At: time.Now(), Total: st.Page.Total, Rows: []Row{}, Memory: Memory{Tenants: []Budget{}}, Host: hostInfo(&st)}
	// /v1/status gives a tenant's token the host's memory too: only the host's session
	// shows it, since it sums every tenant's.
	if s.host && st.Memory != nil {
		snap.Memory.Host = hostBudget(st.Memory)
	}
	for _, t := range st.Tenants {
		snap.Memory.Tenants = append(snap.Memory.Tenants, budget(t.Name, t.Memory, tenantConsumers))
		for _, b := range t.Bindings {
			r := Row{
				Tenant: t.Name, Binding: b.Name, Queue: b.Queue, Module: b.Module, Version: short(b.ModuleDigest),
				Visible: b.Messages.Visible, Leased: b.Messages.Leased, Delayed: b.Messages.Delayed,
				Dead: b.DeadLetterDepth, Workers: b.Workers, Breaker: b.Breaker.State,
				Processed: b.Processed, Failed: b.Failed,
			}
			if ls := b.LastScaling; ls != nil {
				r.Scaling = fmt.Sprintf("%s: depth %d, %d workers → %d", ls.At.UTC().Format("15:04:05"), ls.Depth, ls.Workers, ls.Desired)
			}
			snap.Rows = append(snap.Rows, r)
		}
	}
	return snap, nil
}

// events streams the overview (GET /console/events?offset=N): a snapshot event every
// Interval until the client goes, the session ends (logout, expiry, a revoked token) or
// the console closes (shutdown). Streams are bounded per session and in all (429).
func (c *Console) events(w http.ResponseWriter, r *http.Request, s *session) {
	if !c.openStream(s) {
		http.Error(w, "too many live-update streams open", http.StatusTooManyRequests)
		return
	}
	defer c.closeStream(s)
	offset, _ := strconv.Atoi(r.URL.Query().Get("offset"))
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rt := rates{}
	tick := time.NewTicker(c.opts.Interval)
	defer tick.Stop()
	for {
		// The admin server's deadlines are for one-shot answers: a stream moves them on
		// with each event, so a client that stops reading is still cut.
		_ = rc.SetReadDeadline(time.Now().Add(c.opts.Interval + 30*time.Second))
		_ = rc.SetWriteDeadline(time.Now().Add(c.opts.Interval + 30*time.Second))
		snap, err := c.snapshot(r.Context(), s, max(offset, 0))
		var payload []byte
		event := "snapshot"
		if err != nil {
			event, payload = "failure", mustJSON(map[string]string{"error": err.Error()})
		} else {
			rt.apply(snap.Rows, snap.At)
			payload = mustJSON(snap)
		}
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, payload); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		select {
		case <-tick.C:
		case <-r.Context().Done():
			return
		case <-s.done:
			_, _ = fmt.Fprint(w, "event: ended\ndata: {}\n\n")
			_ = rc.Flush()
			return
		case <-c.done:
			return
		}
		if time.Now().After(s.expires) {
			c.end(s)
		}
	}
}

func (c *Console) openStream(s *session) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.ended || s.streams >= MaxStreamsPerSession || c.streams >= MaxStreams {
		return false
	}
	s.streams++
	c.streams++
	return true
}

func (c *Console) closeStream(s *session) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s.streams--
	c.streams--
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte(`{"error":"encoding"}`)
	}
	return b
}

func short(digest string) string {
	if len(digest) > 12 {
		return digest[:12]
	}
	return digest
}
