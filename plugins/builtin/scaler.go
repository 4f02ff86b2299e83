package builtin

import (
	"context"
	"fmt"
	"slices"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/queue"
)

// DepthRow is one threshold of a DepthTable: a depth of at least Depth wants Workers workers.
type DepthRow struct {
	Depth   int64
	Workers int
}

// WhitepaperTable returns the whitepaper's GetOptimalDequeueTaskCount thresholds: under 100
// messages 10 workers, under 1000 50, from 1000 on 100. The listener clamps them to its
// MaxWorkers (16 by default), so with the default limits any backlog starts the maximum.
func WhitepaperTable() []DepthRow {
	return []DepthRow{{Depth: 0, Workers: 10}, {Depth: 100, Workers: 50}, {Depth: 1000, Workers: 100}}
}

// DepthTable is a listener.Scaler that looks the queue depth up in a table of thresholds
// and clamps the answer to the State's MinWorkers..MaxWorkers.
type DepthTable struct {
	rows []DepthRow // sorted by Depth, one row per depth
}

var _ listener.Scaler = (*DepthTable)(nil)

// NewDepthTable returns a scaler over rows; nil or empty rows mean WhitepaperTable. Rows may
// come in any order; of rows with the same Depth the last wins. CheckDepthRows reports the
// mistakes a config should be refused for.
func NewDepthTable(rows []DepthRow) *DepthTable {
	if len(rows) == 0 {
		rows = WhitepaperTable()
	}
	sorted := slices.Clone(rows)
	slices.SortStableFunc(sorted, func(a, b DepthRow) int {
		switch {
		case a.Depth < b.Depth:
			return -1
		case a.Depth > b.Depth:
			return 1
		}
		return 0
	})
	out := sorted[:0]
	for _, r := range sorted {
		if n := len(out); n > 0 && out[n-1].Depth == r.Depth {
			out[n-1] = r
			continue
		}
		out = append(out, r)
	}
	return &DepthTable{rows: out}
}

// CheckDepthRows reports the first row a config should not contain: a negative depth or
// worker count, or a depth listed twice. Errors name the row by its index.
func CheckDepthRows(rows []DepthRow) error {
	seen := make(map[int64]int, len(rows))
	for i, r := range rows {
		if r.Depth < 0 {
			return fmt.Errorf("depth table row %d: depth %d is negative", i, r.Depth)
		}
		if r.Workers < 0 {
			return fmt.Errorf("depth table row %d: workers %d is negative", i, r.Workers)
		}
		if j, dup := seen[r.Depth]; dup {
			return fmt.Errorf("depth table row %d: depth %d already given in row %d", i, r.Depth, j)
		}
		seen[r.Depth] = i
	}
	return nil
}

// Rows returns the effective table, sorted by depth.
func (t *DepthTable) Rows() []DepthRow { return slices.Clone(t.rows) }

// Desired implements listener.Scaler: the Workers of the deepest row whose Depth the queue
// depth reaches, or MinWorkers below the first row, clamped to MinWorkers..MaxWorkers.
func (t *DepthTable) Desired(_ context.Context, s listener.State) int {
	depth := max(s.Depth, 0)
	want := int64(s.MinWorkers)
	for _, r := range t.rows {
		if depth < r.Depth {
			break
		}
		want = int64(r.Workers)
	}
	return clampWorkers(want, s)
}

// DefaultTargetPerWorker is Target's default: one full receive batch (queue.MaxBatch) per
// worker, since a worker leases and runs a whole batch at once. (KEDA's default of 5 counts
// messages per pod, not per batch-receiving worker.)
const DefaultTargetPerWorker = queue.MaxBatch

// Target is KEDA's scaling rule as a listener.Scaler: ceil(depth / target per worker),
// clamped to the State's MinWorkers..MaxWorkers.
type Target struct {
	perWorker int64
}

var _ listener.Scaler = (*Target)(nil)

// NewTarget returns the target-per-worker scaler; perWorker <= 0 means
// DefaultTargetPerWorker.
func NewTarget(perWorker int64) *Target {
	if perWorker <= 0 {
		perWorker = DefaultTargetPerWorker
	}
	return &Target{perWorker: perWorker}
}

// PerWorker returns the effective target depth per worker.
func (t *Target) PerWorker() int64 { return t.perWorker }

// Desired implements listener.Scaler.
func (t *Target) Desired(_ context.Context, s listener.State) int {
	depth := max(s.Depth, 0)
	want := depth / t.perWorker // written so that depths near MaxInt64 cannot overflow
	if depth%t.perWorker != 0 {
		want++
	}
	return clampWorkers(want, s)
}

// clampWorkers bounds n to the State's MinWorkers..MaxWorkers. A negative minimum counts as
// 0, a maximum below the minimum as the minimum, and a maximum of 0 or less as "no bound"
// (the listener applies its own).
func clampWorkers(n int64, s listener.State) int {
	lo := int64(max(s.MinWorkers, 0))
	n = max(n, lo)
	if s.MaxWorkers > 0 {
		n = min(n, max(int64(s.MaxWorkers), lo))
	}
	// Without a maximum, still return something an int and a goroutine count can hold.
	return int(min(n, int64(maxWorkersUnbounded)))
}

// maxWorkersUnbounded caps answers when the State gives no maximum.
const maxWorkersUnbounded = 1 << 16
