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
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/wqhost/wqhost/internal/diskprobe"
)

// riverArgs is the job: the same 100-byte body as every other system's message.
type riverArgs struct {
	Body string `json:"body"`
}

func (riverArgs) Kind() string { return "drain_noop" }

// River's own benchmark (cmd/river bench, v0.51.2) runs its client with these settings:
// 2,000 workers, a 2 ms fetch cooldown and a 20 ms poll interval, which its authors found
// "much better than the client's default values" for throughput. Both River drains use them.
const (
	riverFetchCooldown     = 2 * time.Millisecond
	riverFetchPollInterval = 20 * time.Millisecond
)

// riverSetup names River's settings in a Result's Setup.
func riverSetup(driver string, o Options) string {
	return fmt.Sprintf("River v0.51.2, %s, %d workers, fetch cooldown %s, poll %s (as River's benchmark)", driver, o.RiverWorkers, riverFetchCooldown, riverFetchPollInterval)
}

// riverMigrate creates River's tables.
func riverMigrate[TTx any](ctx context.Context, drv riverdriver.Driver[TTx]) error {
	mig, err := rivermigrate.New(drv, &rivermigrate.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return fmt.Errorf("river migrator: %w", err)
	}
	if _, err := mig.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrate: %w", err)
	}
	return nil
}

// riverPreload inserts n jobs through an insert-only client, 1,000 at a time.
func riverPreload[TTx any](ctx context.Context, drv riverdriver.Driver[TTx], n int) error {
	client, err := river.NewClient(drv, &river.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return fmt.Errorf("river insert client: %w", err)
	}
	params := make([]river.InsertManyParams, 0, 1000)
	for sent := 0; sent < n; {
		params = params[:0]
		for ; sent < n && len(params) < cap(params); sent++ {
			params = append(params, river.InsertManyParams{Args: riverArgs{Body: string(Body)}})
		}
		if _, err := client.InsertMany(ctx, params); err != nil {
			return fmt.Errorf("preload: %w", err)
		}
	}
	return nil
}

// riverWork starts a River client with no-op workers on drv, waits until it completed
// o.Messages jobs, stops it, and returns the time from its start to the last completion.
func riverWork[TTx any](ctx context.Context, drv riverdriver.Driver[TTx], o Options) (time.Duration, error) {
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(context.Context, *river.Job[riverArgs]) error { return nil }))
	client, err := river.NewClient(drv, &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: o.RiverWorkers}},
		Workers:           workers,
		FetchCooldown:     riverFetchCooldown,
		FetchPollInterval: riverFetchPollInterval,
		Logger:            slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return 0, fmt.Errorf("river client: %w", err)
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
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return 0, fmt.Errorf("river start: %w", err)
	}
	err = waitFor(ctx, o.Timeout, func() bool { return completed.Load() >= int64(o.Messages) },
		func() string { return fmt.Sprintf("%d of %d completed", completed.Load(), o.Messages) })
	elapsed := time.Since(start)
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if serr := client.Stop(stopCtx); err == nil && serr != nil {
		err = fmt.Errorf("river stop: %w", serr)
	}
	return elapsed, err
}

// RiverSQLite drains o.Messages jobs with River on SQLite: the same modernc driver and
// pragmas as the local store (WAL, synchronous=FULL, busy_timeout, immediate transactions)
// and one connection, as riversqlite advises. SQLite has no LISTEN/NOTIFY, so River polls.
func RiverSQLite(ctx context.Context, o Options) (Result, error) {
	o.defaults()
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(o.Dir)
	path := filepath.Join(o.Dir, "river.db")
	commits := diskprobe.Commits(path)
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
	if err := riverMigrate(ctx, drv); err != nil {
		return Result{}, err
	}
	if err := riverPreload(ctx, drv, o.Messages); err != nil {
		return Result{}, err
	}
	c0 := commits.Load()
	elapsed, err := riverWork(ctx, drv, o)
	c1 := commits.Load()
	if err != nil {
		return Result{}, err
	}
	var left int64
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM river_job WHERE state != 'completed'`).Scan(&left); err != nil || left != 0 {
		return Result{}, fmt.Errorf("%d jobs not completed after the drain (%v)", left, err)
	}
	res := result("river-sqlite", riverSetup("riversqlite, 1 connection", o), "SQLite WAL, synchronous=FULL (fsync per commit)",
		o.Messages, elapsed, float64(c1-c0), "SQLite commits", c1-c0)
	res.SyncsPerMsg = res.CommitsPerMsg
	return res, nil
}
