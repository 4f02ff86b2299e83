package report

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/wqhost/wqhost/bench/internal/chart"
	"github.com/wqhost/wqhost/bench/internal/consumer"
	"github.com/wqhost/wqhost/bench/internal/engine"
	"github.com/wqhost/wqhost/bench/internal/suite"
)

// Chart names, relative to the docs directory.
const (
	ChartPerCall   = "img/bench-percall.png"
	ChartEngines   = "img/bench-engines.png"
	ChartConsumers = "img/bench-consumers.png"
	ChartCalls     = "img/bench-calls-per-msg.png"
	ChartIdle      = "img/bench-idle.png"
	ChartScaling   = "img/bench-scaling.png"
	ChartSizes     = "img/bench-sizes.png"
	ChartDensity   = "img/bench-density.png"
	ChartDrain     = "img/bench-drain.png"
)

// Charts renders every chart that has data into imgDir and returns the names rendered.
func Charts(r *Results, imgDir string) ([]string, error) {
	var done []string
	file := func(name string) string { return filepath.Join(imgDir, filepath.Base(name)) }
	add := func(name string, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		done = append(done, name)
		return nil
	}
	if len(r.PerCall) > 0 {
		groups, series := engineBars(r.PerCall, func(x suite.PerCallRow) (engine.Logic, engine.Kind, float64) { return x.Logic, x.Engine, x.NsPerCall })
		if err := add(ChartPerCall, chart.LogBars(file(ChartPerCall), "Cost of one handler call (one goroutine, lower is better)", "ns", groups, series)); err != nil {
			return done, err
		}
	}
	if len(r.Engines) > 0 {
		groups, series := engineBars(r.Engines, func(x suite.RunResult) (engine.Logic, engine.Kind, float64) { return x.Logic, x.Engine, x.MsgPerSec })
		if err := add(ChartEngines, chart.LogBars(file(ChartEngines), "End to end through the listener, in-memory queue (higher is better)", "msg/s", groups, series)); err != nil {
			return done, err
		}
	}
	if len(r.Consumers) > 0 {
		groups, series := consumerBars(r.Consumers, func(x suite.RunResult) float64 { return x.MsgPerSec })
		if err := add(ChartConsumers, chart.LogBars(file(ChartConsumers), "Draining a queue: throughput by consumer (higher is better)", "msg/s", groups, series)); err != nil {
			return done, err
		}
		groups, series = consumerBars(r.Consumers, func(x suite.RunResult) float64 { return x.CallsPerMsg })
		if err := add(ChartCalls, chart.LogBars(file(ChartCalls), "Queue calls per message handled (lower is better)", "calls", groups, series)); err != nil {
			return done, err
		}
	}
	if len(r.Idle) > 0 {
		var groups []string
		var labels []string
		for _, x := range r.Idle {
			if !slices.Contains(groups, string(x.Backend)) {
				groups = append(groups, string(x.Backend))
			}
			if !slices.Contains(labels, x.Consumer) {
				labels = append(labels, x.Consumer)
			}
		}
		var series []chart.Series
		for _, l := range labels {
			s := chart.Series{Name: l, Values: make([]float64, len(groups))}
			for _, x := range r.Idle {
				if x.Consumer == l {
					s.Values[slices.Index(groups, string(x.Backend))] = x.PerHour
				}
			}
			series = append(series, s)
		}
		if err := add(ChartIdle, chart.LogBars(file(ChartIdle), "Billed queue calls per hour while the queue is empty (lower is better; no bar = 0)", "calls/hour", groups, series)); err != nil {
			return done, err
		}
	}
	if len(r.Scaling) > 0 {
		if err := add(ChartScaling, scalingChart(file(ChartScaling), r.Scaling)); err != nil {
			return done, err
		}
	}
	if len(r.Sizes) > 0 {
		if err := add(ChartSizes, sizesChart(file(ChartSizes), r.Sizes)); err != nil {
			return done, err
		}
	}
	if len(r.Density) > 0 {
		if err := add(ChartDensity, densityChart(file(ChartDensity), r.Density)); err != nil {
			return done, err
		}
	}
	if len(r.Drain) > 0 {
		if err := add(ChartDrain, drainChart(file(ChartDrain), r.Drain)); err != nil {
			return done, err
		}
	}
	return done, nil
}

// engineBars groups rows by logic, one series per engine, in the engines' fixed order.
func engineBars[T any](rows []T, key func(T) (engine.Logic, engine.Kind, float64)) ([]string, []chart.Series) {
	var groups []string
	for _, l := range engine.Logics {
		for _, x := range rows {
			if lg, _, _ := key(x); lg == l {
				groups = append(groups, string(l))
				break
			}
		}
	}
	var series []chart.Series
	for _, k := range engine.Kinds {
		s := chart.Series{Name: string(k), Values: make([]float64, len(groups))}
		any := false
		for _, x := range rows {
			lg, kk, v := key(x)
			if kk == k {
				s.Values[slices.Index(groups, string(lg))] = v
				any = true
			}
		}
		if any {
			series = append(series, s)
		}
	}
	return groups, series
}

// consumerBars groups rows by backend, one series per consumer.
func consumerBars(rows []suite.RunResult, val func(suite.RunResult) float64) ([]string, []chart.Series) {
	var groups []string
	for _, b := range suite.Backends {
		for _, x := range rows {
			if x.Backend == b {
				groups = append(groups, string(b))
				break
			}
		}
	}
	var series []chart.Series
	for _, k := range consumer.Kinds {
		s := chart.Series{Name: string(k), Values: make([]float64, len(groups))}
		for _, x := range rows {
			if x.Consumer == k {
				s.Values[slices.Index(groups, string(x.Backend))] = val(x)
			}
		}
		series = append(series, s)
	}
	return groups, series
}
