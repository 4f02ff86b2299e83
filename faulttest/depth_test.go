package faulttest

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the local store's driver, to count its messages from outside
)

// depthSample is one look at the store's true count, or at the depth the host reports, with
// the time it was taken. A report's at is when its request was sent and done when its answer
// came back: the host read its depth somewhere before done.
type depthSample struct {
	at, done time.Time
	count    int64
}

// depthFreshness compares the depths a host reported (/v1/status, what
// wqhost_queue_messages serves) with the store's true counts sampled beside them during a
// drain. The test samples the store right before each request and right after its answer,
// so every report is bracketed by two true counts. Per report R sent at t:
//
//   - error: how far R lies outside the range of true counts from the second before t up
//     to the first count taken after the answer, relative to it (0 when the store held R
//     at some moment of that window; during a drain the count only falls, so the count
//     after the answer bounds what the store held when the host could last have read it);
//   - lag: how long before t the store last held at least R less 2 % (0 when it still
//     did at t).
//
// Reports taken while the store held fewer than minBacklog messages are left out: the
// figures are about a backlog; so are reports of -1 (not read yet, right after a start).
func depthFreshness(truth, reported []depthSample, minBacklog int64) (lagP99 time.Duration, errMax float64, n int, worst string) {
	var lags []time.Duration
	for _, r := range reported {
		if r.count < 0 {
			continue // -1: not read yet (a host just started), which status says as such
		}
		lo, hi, seen := int64(0), int64(0), false
		var now int64 = -1
		for _, s := range truth {
			if s.at.After(r.at) && now < 0 {
				break // no count before the request: nothing to compare with
			}
			if !s.at.After(r.at) {
				now = s.count
			}
			if r.at.Sub(s.at) > time.Second {
				continue
			}
			if !seen {
				lo, hi, seen = s.count, s.count, true
			}
			lo, hi = min(lo, s.count), max(hi, s.count)
			if s.at.After(r.done) {
				break // the first count after the answer closes the window
			}
		}
		if !seen || now < minBacklog {
			continue
		}
		n++
		e := 0.0
		switch {
		case r.count < lo:
			e = float64(lo-r.count) / float64(lo)
		case r.count > hi:
			e = float64(r.count-hi) / float64(hi)
		}
		if e > errMax {
			errMax, worst = e, fmt.Sprintf("reported %d at %s; the store held %d..%d from the second before to just after the answer (%d when sent)", r.count, r.at.Sub(truth[0].at).Round(time.Millisecond), lo, hi, now)
		}
		lag := time.Duration(0)
		floor := r.count - r.count/50
		if now < floor {
			lag = r.at.Sub(truth[0].at) // never held: as old as the run
			for _, s := range truth {
				if s.at.After(r.at) {
					break
				}
				if s.count >= floor {
					lag = r.at.Sub(s.at)
				}
			}
		}
		lags = append(lags, lag)
	}
	if len(lags) == 0 {
		return 0, 0, 0, ""
	}
	slices.Sort(lags)
	return lags[(len(lags)*99)/100], errMax, n, worst
}

// sampleDepths samples count (the store's truth) and the host's reported depth of
// default/echo every 20 ms until the binding drained or limit passed: the store right before
// each status request and again right after its answer.
func sampleDepths(t *testing.T, p *proc, count func() (int64, error), limit time.Duration) (truth, reported []depthSample) {
	t.Helper()
	deadline := time.Now().Add(limit)
	look := func() int64 {
		c, err := count()
		if err != nil {
			t.Fatalf("the store's count: %v", err)
		}
		truth = append(truth, depthSample{at: time.Now(), count: c})
		return c
	}
	for time.Now().Before(deadline) {
		c := look()
		sent := time.Now()
		bs, err := p.status("default", "echo", "")
		if err == nil {
			reported = append(reported, depthSample{at: sent, done: time.Now(), count: bs.Depth})
			c = look()
		}
		if c == 0 && err == nil && bs.Depth == 0 && bs.InFlight == 0 {
			return truth, reported
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("not drained within %s", limit)
	return nil, nil
}

// depthBinding is the echo binding the depth rows drain: 16 workers of 32.
func depthBinding(backend string) string {
	return fmt.Sprintf(`
    bindings:
      echo:
        backend: %s
        queue: jobs
        output: done
        module: builtin:echo-go
        backoff: {min: 10ms, max: 200ms}
`, backend)
}

// reportDepth prints the row and fails beyond 1 s and 2 %.
func reportDepth(t *testing.T, backend string, truth, reported []depthSample) {
	t.Helper()
	lag, errMax, n, worst := depthFreshness(truth, reported, 200)
	fmt.Printf("depth freshness: backend=%s lag_p99=%.2fs error_max=%.1f%% samples=%d\n", backend, lag.Seconds(), errMax*100, n)
	if n < 10 {
		t.Fatalf("only %d reports under a backlog; the drain was too fast to measure", n)
	}
	if lag > time.Second || errMax > 0.02 {
		t.Errorf("backend %s: depth lag p99 %s, error max %.1f%% (%s); want within 1s and 2%%", backend, lag, errMax*100, worst)
	}
}

const depthBacklog = 20000

// TestFaultDepthFreshnessLocal: under a 20,000-message backlog on the local store, the depth
// the host reports tracks the store's own count (read from outside with SQLite) within 1 s
// and 2 %. It prints `depth freshness: backend=local lag_p99=…s error_max=…%`.
func TestFaultDepthFreshnessLocal(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, fmt.Sprintf("data_dir: %s\nlog: {level: warn}\ntenants:\n  default:%s",
		filepath.Join(dir, "data"), depthBinding("local")))
	mustWQ(t, nil, "send", "--config", cfg, "--queue", "jobs", "--count", strconv.Itoa(depthBacklog), "m-{n}")
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "data", "wqhost.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	count := func() (n int64, err error) {
		err = db.QueryRowContext(context.Background(), `SELECT count(*) FROM messages WHERE queue = 'jobs'`).Scan(&n)
		return n, err
	}
	p := startReady(t, cfg, nil)
	truth, reported := sampleDepths(t, p, count, 5*time.Minute)
	reportDepth(t, "local", truth, reported)
	if code := p.stop(time.Minute); code != 0 {
		t.Errorf("SIGTERM: exit %d", code)
	}
}

// TestFaultDepthFreshnessNATS: the same on an R3 JetStream work-queue stream of a 3-node
// cluster of nats-server processes, the truth read as the stream's message count. It prints
// `depth freshness: backend=nats …`.
func TestFaultDepthFreshnessNATS(t *testing.T) {
	c := natsCluster(t)
	dir := t.TempDir()
	cfg := c.r3Config(dir, "log: {level: warn}\n", depthBinding("js"))
	mustWQ(t, nil, "send", "--config", cfg, "--queue", "jobs", "--count", strconv.Itoa(depthBacklog), "m-{n}")
	js := c.js()
	count := func() (int64, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := js.Stream(ctx, "WQ_jobs")
		if err != nil {
			return 0, err
		}
		info, err := s.Info(ctx)
		if err != nil {
			return 0, err
		}
		return int64(info.State.Msgs), nil
	}
	p := startReady(t, cfg, nil)
	truth, reported := sampleDepths(t, p, count, 5*time.Minute)
	reportDepth(t, "nats", truth, reported)
	if code := p.stop(time.Minute); code != 0 {
		t.Errorf("SIGTERM: exit %d", code)
	}
}

// quoted is each of ss as a Go (and YAML) quoted string.
func quoted(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

// TestFaultDepthFreshnessJudge: the judge of the depth rows, on made-up drains. A report that
// lies between the counts taken before its request and after its answer is exact; one above
// every count of the window is stale, by how much and how long.
func TestFaultDepthFreshnessJudge(t *testing.T) {
	t0 := time.Unix(0, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	// A drain of 10 messages a millisecond: 10,000 at 0 ms, sampled every 50 ms.
	var truth []depthSample
	for i := 0; i <= 800; i += 50 {
		truth = append(truth, depthSample{at: ms(i), count: int64(10000 - 10*i)})
	}
	for _, tc := range []struct {
		name    string
		report  depthSample
		wantErr float64 // error max, within 0.001
		wantLag time.Duration
	}{
		{"read during the request", depthSample{at: ms(401), done: ms(449), count: 5800}, 0, 0},
		{"read at the answer", depthSample{at: ms(401), done: ms(449), count: 5550}, 0, 0},
		{"as old as 200 ms before", depthSample{at: ms(401), done: ms(449), count: 8000}, 0, 201 * time.Millisecond},
		{"higher than the store ever was", depthSample{at: ms(401), done: ms(449), count: 11000}, 0.1, 401 * time.Millisecond},
		{"stale by 300 ms", depthSample{at: ms(701), done: ms(749), count: 6100}, 0, 301 * time.Millisecond},
		{"lower than the store after the answer", depthSample{at: ms(401), done: ms(449), count: 5000}, 0.0909, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lag, errMax, n, worst := depthFreshness(truth, []depthSample{tc.report}, 200)
			if n != 1 {
				t.Fatalf("judged %d reports, want 1", n)
			}
			if d := errMax - tc.wantErr; d > 0.001 || d < -0.001 {
				t.Errorf("error %.4f, want %.4f (%s)", errMax, tc.wantErr, worst)
			}
			if lag != tc.wantLag {
				t.Errorf("lag %s, want %s", lag, tc.wantLag)
			}
		})
	}
}
