package report

import (
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/bench/internal/consumer"
	"github.com/wqhost/wqhost/bench/internal/engine"
	"github.com/wqhost/wqhost/bench/internal/suite"
)

func sample() *Results {
	return &Results{
		Command: "cd bench && go run . all --out ../docs",
		Machine: Machine{CPU: "Test CPU", Cores: 2, Go: "go1.26"},
		PerCall: []suite.PerCallRow{
			{Logic: engine.Noop, Engine: engine.Go, NsPerCall: 2},
			{Logic: engine.Noop, Engine: engine.Wqhost, NsPerCall: 1000},
			{Logic: engine.Noop, Engine: engine.Extism, NsPerCall: 45000},
			{Logic: engine.Noop, Engine: engine.Instantiate, NsPerCall: 9e6},
		},
		Engines: []suite.RunResult{
			{RunOptions: suite.RunOptions{Backend: suite.Memory, Consumer: consumer.Listener, Engine: engine.Wqhost, Logic: engine.Noop}, MsgPerSec: 90000},
			{RunOptions: suite.RunOptions{Backend: suite.Memory, Consumer: consumer.Listener, Engine: engine.Extism, Logic: engine.Noop}, MsgPerSec: 9000},
		},
		Consumers: []suite.RunResult{
			{RunOptions: suite.RunOptions{Backend: suite.Local, Consumer: consumer.Listener}, MsgPerSec: 9000, CallsPerMsg: 0.07},
			{RunOptions: suite.RunOptions{Backend: suite.Local, Consumer: consumer.Naive}, MsgPerSec: 600, CallsPerMsg: 2},
		},
		Idle:    []suite.IdleRow{{Backend: suite.Local, Consumer: "fixed 1 s poller", Seconds: 60, PerHour: 3600}},
		Started: time.Date(2026, 11, 22, 18, 0, 0, 0, time.UTC),
	}
}

func TestMarkdownShowsRatiosAndCommand(t *testing.T) {
	md := Markdown(sample(), []string{ChartPerCall})
	for _, want := range []string{
		"cd bench && go run . all --out ../docs",
		"| no-op call: Extism without a limit ÷ wqhost with its default limit | 45.0× | |",
		"instantiate-per-message ÷ wqhost pooled | 9000×",
		"end to end, noop: wqhost Go guest with its default time limit ÷ Extism without | 10.0× (90000 vs 9000 msg/s)",
		"local: listener msg/s ÷ naive loop msg/s | 15.0×",
		"![per-call cost by engine](img/bench-percall.png)",
		"Test CPU, 2 cores",
		"Azurite rows | **TODO**",
		"go test -run '^$' -bench .",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("benchmarks.md lacks %q", want)
		}
	}
	if strings.Contains(md, "img/bench-engines.png") {
		t.Error("links a chart that was not rendered")
	}
}

func TestChartsRenderWhatHasData(t *testing.T) {
	dir := t.TempDir()
	got, err := Charts(sample(), dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{ChartPerCall, ChartEngines, ChartConsumers, ChartCalls, ChartIdle}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("rendered %v, want %v", got, want)
	}
}
