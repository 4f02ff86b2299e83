package suite

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/bench/internal/engine"
)

// TestHeadlineContestsGiveEverySideTheSameWork: every engine of a contest drains the same
// number of messages in the same number of rounds and makes the same calls, and gets both
// figures; the headline's contests put Extism's own plugin first against the same file in
// wqhost.
func TestHeadlineContestsGiveEverySideTheSameWork(t *testing.T) {
	ctx := context.Background()
	paths, stores := testSetup(t)
	contests := []Contest{{engine.Noop, []engine.Kind{engine.Extism, engine.WqhostExtism}}}
	figs, err := MeasureHeadline(ctx, HeadlineOptions{Paths: paths, Stores: stores, Contests: contests,
		Messages: 120, Rounds: 2, CallRounds: 2, RoundTime: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if len(figs) != 2 {
		t.Fatalf("got %d figures, want one per engine: %+v", len(figs), figs)
	}
	for _, f := range figs {
		if f.Messages != 120 || f.Rounds != 2 || f.CallRounds != 2 || f.RoundTime != 20*time.Millisecond || f.CallsPerRound < 1 {
			t.Errorf("%s: sized %+v, want the same messages, rounds and round length as every other side", f.Engine, f)
		}
		if f.NsPerCall <= 0 || f.MsgPerSec <= 0 {
			t.Errorf("%s: no figure: %+v", f.Engine, f)
		}
	}
	if FindFigure(figs, engine.Noop, engine.WqhostExtism) == nil || FindFigure(figs, engine.Vowels, engine.WqhostExtism) != nil {
		t.Error("FindFigure does not find figures by logic and engine")
	}
	first := HeadlineContests[0]
	if first.Logic != engine.Vowels || first.Engines[0] != engine.Extism || first.Engines[1] != engine.WqhostExtism {
		t.Errorf("the first contest is %v, want Extism's count_vowels.wasm against the same file in wqhost", first)
	}
}

// TestHeadlineRefusesAnEngineWithoutTheModule: a contest whose engine has no module for the
// logic fails naming it rather than leaving a side out.
func TestHeadlineRefusesAnEngineWithoutTheModule(t *testing.T) {
	ctx := context.Background()
	paths, stores := testSetup(t)
	_, err := MeasureHeadline(ctx, HeadlineOptions{Paths: paths, Stores: stores,
		Contests: []Contest{{engine.Billing, []engine.Kind{engine.Wqhost, engine.Extism}}}, Messages: 10, Rounds: 1, CallRounds: 1, RoundTime: time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "extism") {
		t.Errorf("err = %v, want a refusal naming the engine without a billing module", err)
	}
}
