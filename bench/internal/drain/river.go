package drain

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
)

// riverArgs is the job: the same 100-byte body as every other system's message.
type riverArgs struct {
	Body string `json:"body"`
}

func (riverArgs) Kind() string { return "drain_noop" }

// River drains o.Messages jobs with River on SQLite: the same modernc driver and pragmas as
// the local store (WAL, synchronous=FULL, busy_timeout, immediate transactions), one
// connection as riversqlite advises, o.Workers workers, and the shortest fetch cooldown and
// poll interval River allows (its defaults, 100 ms and 1 s, would cap a drain at a few
// fetches a second; SQLite has no LISTEN/NOTIFY, so River polls).
func River(ctx context.Context, o Options) (Result, error) {
	o.defaults()
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(o.Dir)
	path := filepath.Join(o.Dir, "river.db")
	commits := commitCounter(path)
	q := url.Values{}
	for _, p := range []string{"busy_timeout(10000)", "journal_mode(WAL)", "synchronous(FULL)"} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return Result{}, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	drv := riversqlite.New(db)
	mig, err := rivermigrate.New(drv, &rivermigrate.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return Result{}, fmt.Errorf("river migrator: %w", err)
	}
	if _, err := mig.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return Result{}, fmt.Errorf("river migrate: %w", err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(context.Context, *river.Job[riverArgs]) error { return nil }))
	client, err := river.NewClient(drv, &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: o.Workers}},
		Workers:           workers,
		FetchCooldown:     river.FetchCooldownMin,
		FetchPollInterval: river.FetchPollIntervalMin,
		Logger:            slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return Result{}, fmt.Errorf("river client: %w", err)
	}
	params := make([]river.InsertManyParams, 0, 1000)
	for sent := 0; sent < o.Messages; {
		params = params[:0]
		for ; sent < o.Messages && len(params) < cap(params); sent++ {
			params = append(params, river.InsertManyParams{Args: riverArgs{Body: string(Body)}})
		}
		if _, err := client.InsertMany(ctx, params); err != nil {
			return Result{}, fmt.Errorf("preload: %w", err)
		}
	}
	// Completed counts jobs whose completion River has written, not only worked ones. River
	// drops events that overflow the channel: it holds every job's.
	events, unsubscribe := client.SubscribeConfig(&river.SubscribeConfig{Kinds: []river.EventKind{river.EventKindJobCompleted}, ChanSize: o.Messages + 1000})
	defer unsubscribe()
	var completed atomic.Int64
	go func() {
		for range events {
			completed.Add(1)
		}
	}()
	c0 := commits.Load()
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return Result{}, fmt.Errorf("river start: %w", err)
	}
	err = waitFor(ctx, o.Timeout, func() bool { return completed.Load() >= int64(o.Messages) },
		func() string { return fmt.Sprintf("%d of %d completed", completed.Load(), o.Messages) })
	elapsed := time.Since(start)
	c1 := commits.Load()
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if serr := client.Stop(stopCtx); err == nil && serr != nil {
		err = fmt.Errorf("river stop: %w", serr)
	}
	if err != nil {
		return Result{}, err
	}
	var left int64
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM river_job WHERE state != 'completed'`).Scan(&left); err != nil || left != 0 {
		return Result{}, fmt.Errorf("%d jobs not completed after the drain (%v)", left, err)
	}
	return result("river", fmt.Sprintf("River v0.51.2, riversqlite, %d workers, 1 connection, fetch cooldown/poll 1 ms", o.Workers),
		"SQLite WAL, synchronous=FULL (fsync per commit)", o.Messages, elapsed, float64(c1-c0), "SQLite commits", c1-c0), nil
}
