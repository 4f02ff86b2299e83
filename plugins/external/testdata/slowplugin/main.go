// Command slowplugin is a test policy plugin that misbehaves on request: it answers every
// policy, sleeps past any deadline for queue "slow", and returns absurd answers for queue
// "absurd" (and for Idle >= 1000 and failures whose error is "absurd").
package main

import (
	"context"
	"errors"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/outcome"
	"github.com/wqhost/wqhost/plugins/sdk"
)

type p struct{}

func (p) Next(_ context.Context, s listener.IdleState) (time.Duration, bool) {
	if s.Idle >= 1000 {
		return 1000 * time.Hour, false
	}
	if s.Idle < 0 {
		return -time.Hour, false
	}
	return time.Duration(s.Idle) * time.Millisecond, false
}

func (p) Desired(_ context.Context, s listener.State) int {
	switch s.Queue {
	case "slow":
		time.Sleep(5 * time.Second)
		return 3
	case "absurd":
		return 1_000_000
	case "negative":
		return -50
	}
	return 3
}

func (p) Decide(_ context.Context, f listener.Failure) outcome.Outcome {
	if f.Outcome.Reason() == "absurd" {
		return outcome.Outcome{Kind: outcome.Kind(99)}
	}
	if f.Outcome.Reason() == "long" {
		return outcome.Outcome{Kind: outcome.KindRetry, After: 1000 * time.Hour}
	}
	return outcome.Outcome{Kind: outcome.KindDrop, Err: errors.New("slowplugin")}
}

func main() {
	sdk.Serve(sdk.Policies{Name: "slowplugin", Backoff: p{}, Scaler: p{}, Poison: p{}})
}
