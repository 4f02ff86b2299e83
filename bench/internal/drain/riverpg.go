package drain

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

// RiverPostgres drains o.Messages jobs with River on PostgreSQL through its riverpgxv5
// driver (a pgxpool with pgx's default size, as River's CLI opens it; LISTEN/NOTIFY), in a
// new database of o.Postgres, or of a cluster started for this drain alone when that is nil.
//
// Its round trips are read from the server's statistics, as deltas across the drain:
// transactions committed in the database (pg_stat_database.xact_commit) and WAL flushes to
// disk (pg_stat_wal.wal_sync; concurrent commits share one, PostgreSQL's group commit). A
// backend reports its statistics when it exits, so the preload runs on a pool closed before
// the first reading and the drain's pool is closed before the second.
func RiverPostgres(ctx context.Context, o Options) (Result, error) {
	o.defaults()
	pg := o.Postgres
	if pg == nil {
		var err error
		if pg, err = StartPostgres(ctx, o.PostgresBin); err != nil {
			return Result{}, err
		}
		defer pg.Stop()
	}
	url, err := pg.NewDatabase(ctx)
	if err != nil {
		return Result{}, err
	}
	stats, err := pgx.Connect(ctx, url)
	if err != nil {
		return Result{}, err
	}
	defer stats.Close(context.WithoutCancel(ctx))

	load, err := pgxpool.New(ctx, url)
	if err != nil {
		return Result{}, err
	}
	err = riverMigrate(ctx, riverpgxv5.New(load))
	if err == nil {
		err = riverPreload(ctx, riverpgxv5.New(load), o.Messages)
	}
	load.Close()
	if err != nil {
		return Result{}, err
	}
	before, err := readPgStats(ctx, stats)
	if err != nil {
		return Result{}, err
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return Result{}, err
	}
	elapsed, err := riverWork(ctx, riverpgxv5.New(pool), o)
	pool.Close()
	if err != nil {
		return Result{}, err
	}
	after, err := readPgStats(ctx, stats)
	if err != nil {
		return Result{}, err
	}
	var left int64
	if err := stats.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state != 'completed'`).Scan(&left); err != nil || left != 0 {
		return Result{}, fmt.Errorf("%d jobs not completed after the drain (%v)", left, err)
	}
	commits, syncs := after.commits-before.commits, after.walSyncs-before.walSyncs
	where := "riverpgxv5, PostgreSQL " + pg.Version + " on loopback"
	if !sameFilesystem(pg.Dir, o.Dir) {
		where += " (its data on another filesystem than the fsync probe's)"
	}
	res := result("river-postgres", riverSetup(where, o),
		"PostgreSQL fsync=on, synchronous_commit=on (WAL flushed before each commit returns)",
		o.Messages, elapsed, float64(commits), "PostgreSQL commits", commits)
	res.SyncsPerMsg = float64(syncs) / float64(o.Messages)
	return res, nil
}

// sameFilesystem reports whether a and b (or b's nearest existing parent) are on one
// device; true when either cannot be read.
func sameFilesystem(a, b string) bool {
	var sa, sb syscall.Stat_t
	for syscall.Stat(b, &sb) != nil {
		if parent := filepath.Dir(b); parent != b {
			b = parent
			continue
		}
		return true
	}
	return syscall.Stat(a, &sa) != nil || sa.Dev == sb.Dev
}

type pgStats struct{ commits, walSyncs int64 }

// readPgStats waits (up to 10 s) until no other session is connected to the database, so
// every closed session's statistics are in, then reads the committed transactions of the
// database and the cluster's WAL flushes.
func readPgStats(ctx context.Context, conn *pgx.Conn) (pgStats, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		var others int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&others); err != nil {
			return pgStats{}, fmt.Errorf("pg_stat_activity: %w", err)
		}
		if others == 0 {
			break
		}
		if time.Now().After(deadline) {
			return pgStats{}, fmt.Errorf("%d sessions still connected 10 s after their pool closed", others)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var s pgStats
	if err := conn.QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&s.commits); err != nil {
		return pgStats{}, fmt.Errorf("read pg_stat_database: %w", err)
	}
	// pg_stat_wal is PostgreSQL 14's; before it the WAL flushes are not counted (0).
	var version int
	if err := conn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
		return pgStats{}, err
	}
	if version >= 140000 {
		if err := conn.QueryRow(ctx, `SELECT wal_sync FROM pg_stat_wal`).Scan(&s.walSyncs); err != nil {
			return pgStats{}, fmt.Errorf("read pg_stat_wal: %w", err)
		}
	}
	return s, nil
}
