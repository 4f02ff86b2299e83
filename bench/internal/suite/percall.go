// Package suite holds the experiments of the benchmark program: per-call cost of each engine,
// end-to-end throughput through a queue and the listener, the scaling and size sweeps, and
// idle-time queue calls. Each returns plain result rows that the report and charts render.
package suite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"time"

	"github.com/wqhost/wqhost/bench/internal/engine"
	"github.com/wqhost/wqhost/bench/internal/measure"
)

// PerCallRow is one engine's cost per call for one logic, one goroutine calling.
type PerCallRow struct {
	Logic        engine.Logic  `json:"logic"`
	Engine       engine.Kind   `json:"engine"`
	BodyBytes    int           `json:"body_bytes"`
	Calls        int64         `json:"calls"`
	NsPerCall    float64       `json:"ns_per_call"`
	AllocsPerOp  float64       `json:"allocs_per_call"`
	BytesPerCall float64       `json:"bytes_per_call"`
	P50          time.Duration `json:"p50_ns"`
	P99          time.Duration `json:"p99_ns"`
}

// SampleBody returns a representative message for a logic: text for vowels, a priced
// transaction for billing, a short payload for noop.
func SampleBody(l engine.Logic, size int) []byte {
	switch l {
	case engine.Billing:
		return []byte(`{"id":"tx-000001","account":"hooli","currency":"GBP","items":[{"sku":"backup-gb","quantity":46,"unit_price":0.05},{"sku":"support-plan","quantity":8,"unit_price":99}]}`)
	default:
		return Text(size)
	}
}

// Text is size bytes of English-like text (about 38% vowels), deterministic.
func Text(size int) []byte {
	const para = "The quick brown fox jumps over the lazy dog; a queue of messages waits for its handler. "
	return bytes.Repeat([]byte(para), size/len(para)+1)[:size]
}

// PerCallOptions configure MeasurePerCall.
type PerCallOptions struct {
	Paths    engine.Paths
	Logics   []engine.Logic
	Engines  []engine.Kind
	BodySize int           // bytes for noop and vowels
	Duration time.Duration // measuring time per engine and logic (after a warm-up)
	// Progress, if set, is called once per finished row.
	Progress func(PerCallRow)
}

// MeasurePerCall times back-to-back calls from one goroutine, engine by engine, in one process
// so the ratios compare like with like. Engines without a module for a logic are skipped.
func MeasurePerCall(ctx context.Context, o PerCallOptions) ([]PerCallRow, error) {
	var rows []PerCallRow
	for _, l := range o.Logics {
		body := SampleBody(l, o.BodySize)
		for _, k := range o.Engines {
			c, err := engine.Open(ctx, k, l, 1, o.Paths)
			if errors.Is(err, engine.ErrUnsupported) {
				continue
			}
			if err != nil {
				return rows, err
			}
			row, err := timeCalls(ctx, c, body, o.Duration)
			_ = c.Close(ctx)
			if err != nil {
				return rows, fmt.Errorf("per call %s on %s: %w", l, k, err)
			}
			row.Logic, row.Engine, row.BodyBytes = l, k, len(body)
			rows = append(rows, row)
			if o.Progress != nil {
				o.Progress(row)
			}
		}
	}
	return rows, nil
}

// timeCalls warms up, then times back-to-back calls in growing rounds for d/2 (no clock
// reads inside the loop, so the floor is not swamped by them) and samples each call's
// latency for another d/2.
func timeCalls(ctx context.Context, c engine.Caller, body []byte, d time.Duration) (PerCallRow, error) {
	warm := time.Now()
	for time.Since(warm) < d/10 {
		if _, err := c.Call(ctx, body); err != nil {
			return PerCallRow{}, err
		}
	}
	var ms0, ms1 goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&ms0)
	var n int64
	start := time.Now()
	for round := int64(16); time.Since(start) < d/2; round = min(round*2, 1<<16) {
		for range round {
			if _, err := c.Call(ctx, body); err != nil {
				return PerCallRow{}, err
			}
		}
		n += round
	}
	elapsed := time.Since(start)
	goruntime.ReadMemStats(&ms1)
	lat := measure.NewLatencies(1 << 16)
	for start := time.Now(); time.Since(start) < d/2 && lat.Len() < 1<<20; {
		t0 := time.Now()
		if _, err := c.Call(ctx, body); err != nil {
			return PerCallRow{}, err
		}
		lat.Add(time.Since(t0))
	}
	return PerCallRow{
		Calls:        n,
		NsPerCall:    float64(elapsed.Nanoseconds()) / float64(n),
		AllocsPerOp:  float64(ms1.Mallocs-ms0.Mallocs) / float64(n),
		BytesPerCall: float64(ms1.TotalAlloc-ms0.TotalAlloc) / float64(n),
		P50:          lat.Percentile(50),
		P99:          lat.Percentile(99),
	}, nil
}

// Ratio returns the per-call cost of engine a over engine b for logic l (how many times
// faster b is), or 0 when either is missing.
func Ratio(rows []PerCallRow, l engine.Logic, a, b engine.Kind) float64 {
	var na, nb float64
	for _, r := range rows {
		if r.Logic != l {
			continue
		}
		switch r.Engine {
		case a:
			na = r.NsPerCall
		case b:
			nb = r.NsPerCall
		}
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return na / nb
}
