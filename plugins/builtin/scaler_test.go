package builtin

import (
	"context"
	"math"
	"testing"

	"github.com/wqhost/wqhost/listener"
)

func TestDepthTableWhitepaper(t *testing.T) {
	ctx := context.Background()
	wide := listener.State{MinWorkers: 1, MaxWorkers: 1000}
	tests := []struct {
		depth    int64
		min, max int
		want     int
	}{
		// GetOptimalDequeueTaskCount: < 100 → 10, < 1000 → 50, otherwise 100.
		{0, 1, 1000, 10},
		{1, 1, 1000, 10},
		{99, 1, 1000, 10},
		{100, 1, 1000, 50},
		{999, 1, 1000, 50},
		{1000, 1, 1000, 100},
		{math.MaxInt64, 1, 1000, 100},
		{-5, 1, 1000, 10}, // a negative (failed) depth reads as empty
		// The listener's limits win.
		{5, 1, 16, 10},
		{150, 1, 16, 16},
		{5000, 1, 16, 16},
		{5, 20, 64, 20},
	}
	for _, tt := range tests {
		s := wide
		s.Depth, s.MinWorkers, s.MaxWorkers = tt.depth, tt.min, tt.max
		for _, rows := range [][]DepthRow{nil, {}, WhitepaperTable()} {
			if got := NewDepthTable(rows).Desired(ctx, s); got != tt.want {
				t.Errorf("whitepaper table (rows %v), depth %d, workers %d..%d: %d, want %d", rows, tt.depth, tt.min, tt.max, got, tt.want)
			}
		}
	}
}

func TestDepthTableCustom(t *testing.T) {
	ctx := context.Background()
	// Out of order, with a duplicate (the later row wins) and a negative worker count.
	table := NewDepthTable([]DepthRow{{Depth: 500, Workers: 8}, {Depth: 10, Workers: 3}, {Depth: 50, Workers: 99}, {Depth: 50, Workers: 5}, {Depth: 5000, Workers: -7}})
	want := []DepthRow{{10, 3}, {50, 5}, {500, 8}, {5000, -7}}
	if got := table.Rows(); len(got) != len(want) {
		t.Fatalf("Rows() = %v, want %v", got, want)
	} else {
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("Rows() = %v, want %v", got, want)
			}
		}
	}
	tests := []struct {
		depth          int64
		minW, maxW, ok int
	}{
		{0, 2, 16, 2}, // below the first row: the minimum
		{9, 2, 16, 2},
		{10, 2, 16, 3},
		{49, 2, 16, 3},
		{50, 2, 16, 5},
		{499, 2, 16, 5},
		{500, 2, 16, 8},
		{500, 2, 6, 6},
		{5000, 2, 16, 2}, // a negative row answer is clamped to the minimum
		{9, 0, 16, 0},    // push listener: zero workers is a valid answer
		{9, -4, 16, 0},   // a negative minimum counts as zero
		{500, 12, 4, 12}, // an inverted State: the minimum wins
		{500, 0, 0, 8},   // no maximum given: the row's answer
		{-1, 1, 16, 1},   // a negative depth reads as empty
		{math.MinInt64, 3, 16, 3},
	}
	for _, tt := range tests {
		s := listener.State{Depth: tt.depth, MinWorkers: tt.minW, MaxWorkers: tt.maxW}
		if got := table.Desired(ctx, s); got != tt.ok {
			t.Errorf("depth %d, workers %d..%d: %d, want %d", tt.depth, tt.minW, tt.maxW, got, tt.ok)
		}
	}
}

func TestCheckDepthRows(t *testing.T) {
	tests := []struct {
		rows []DepthRow
		err  string
	}{
		{nil, ""},
		{WhitepaperTable(), ""},
		{[]DepthRow{{0, 1}, {-1, 2}}, "depth table row 1: depth -1 is negative"},
		{[]DepthRow{{0, -1}}, "depth table row 0: workers -1 is negative"},
		{[]DepthRow{{5, 1}, {7, 2}, {5, 3}}, "depth table row 2: depth 5 already given in row 0"},
	}
	for _, tt := range tests {
		if got := errText(CheckDepthRows(tt.rows)); got != tt.err {
			t.Errorf("CheckDepthRows(%v) = %q, want %q", tt.rows, got, tt.err)
		}
	}
}

func TestTarget(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		perWorker  int64
		depth      int64
		minW, maxW int
		want       int
	}{
		{32, 0, 1, 16, 1},
		{32, 0, 0, 16, 0},
		{32, 1, 0, 16, 1},
		{32, 32, 1, 16, 1},
		{32, 33, 1, 16, 2},
		{32, 64, 1, 16, 2},
		{32, 65, 1, 16, 3},
		{32, 512, 1, 16, 16},
		{32, 513, 1, 16, 16},
		{32, 100, 5, 16, 5},
		{5, 11, 1, 100, 3}, // KEDA's default queueLength
		{1, 7, 1, 100, 7},
		{0, 33, 1, 16, 2},  // 0 → DefaultTargetPerWorker (32)
		{-9, 33, 1, 16, 2}, // negative likewise
		{32, -100, 1, 16, 1},
		{32, math.MinInt64, 2, 16, 2},
		{1, math.MaxInt64, 1, 16, 16},
		{1, math.MaxInt64, 1, 0, maxWorkersUnbounded}, // no maximum given: still a sane number
		{math.MaxInt64, math.MaxInt64, 1, 16, 1},
		{math.MaxInt64, math.MaxInt64 - 1, 0, 16, 1},
		{32, 100, 9, 3, 9}, // inverted State: the minimum wins
	}
	for _, tt := range tests {
		s := listener.State{Depth: tt.depth, MinWorkers: tt.minW, MaxWorkers: tt.maxW}
		if got := NewTarget(tt.perWorker).Desired(ctx, s); got != tt.want {
			t.Errorf("target %d, depth %d, workers %d..%d: %d, want %d", tt.perWorker, tt.depth, tt.minW, tt.maxW, got, tt.want)
		}
	}
	if got := NewTarget(0).PerWorker(); got != DefaultTargetPerWorker {
		t.Errorf("NewTarget(0).PerWorker() = %d, want %d", got, DefaultTargetPerWorker)
	}
}
