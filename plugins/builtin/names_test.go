package builtin

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/outcome"
)

func TestNamedConstructors(t *testing.T) {
	ctx := context.Background()
	for _, name := range append(BackoffNames(), "") {
		b, err := NewBackoffNamed(name, BackoffOptions{MaxIdle: time.Second, Rand: fixedRand(0)})
		if err != nil {
			t.Fatalf("NewBackoffNamed(%q): %v", name, err)
		}
		if d, _ := b.Next(ctx, listener.IdleState{Idle: 50, ActiveWorkers: 1}); d != time.Second {
			t.Errorf("back-off %q ignored its options: delay %v, want 1s", name, d)
		}
	}
	s := listener.State{Depth: 150, MinWorkers: 1, MaxWorkers: 1000}
	scalers := map[string]int{ScalerDepthTable: 50, ScalerTarget: 15, "": 15}
	for _, name := range append(ScalerNames(), "") {
		sc, err := NewScalerNamed(name, ScalerOptions{TargetPerWorker: 10})
		if err != nil {
			t.Fatalf("NewScalerNamed(%q): %v", name, err)
		}
		if got := sc.Desired(ctx, s); got != scalers[name] {
			t.Errorf("scaler %q: %d workers for depth 150, want %d", name, got, scalers[name])
		}
	}
	for _, name := range append(PoisonNames(), "") {
		p, err := NewPoisonNamed(name, PoisonOptions{BaseDelay: time.Second, Jitter: -1})
		if err != nil {
			t.Fatalf("NewPoisonNamed(%q): %v", name, err)
		}
		if d := p.Decide(ctx, failure(1, 5, nil)); d.Kind != outcome.KindRetry || d.After != time.Second {
			t.Errorf("poison %q: %+v, want retry after 1s", name, d)
		}
	}
}

func TestNamedConstructorErrors(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want []string
	}{
		{"unknown back-off", second(NewBackoffNamed("linear", BackoffOptions{})), []string{`"linear"`, "random-exponential"}},
		{"unknown scaler", second(NewScalerNamed("Target", ScalerOptions{})), []string{`"Target"`, "depth-table, target"}},
		{"unknown poison", second(NewPoisonNamed("drop", PoisonOptions{})), []string{`"drop"`, "retry-then-dead-letter"}},
		{"bad table", second(NewScalerNamed(ScalerDepthTable, ScalerOptions{Table: []DepthRow{{-1, 3}}})), []string{`"depth-table"`, "row 0", "negative"}},
		{"bad target", second(NewScalerNamed(ScalerTarget, ScalerOptions{TargetPerWorker: -1})), []string{`"target"`, "-1"}},
		{"bad back-off", second(NewBackoffNamed("", BackoffOptions{MinIdle: -1})), []string{"random-exponential", "min_idle"}},
		{"bad poison", second(NewPoisonNamed("", PoisonOptions{Factor: 0.1})), []string{"retry-then-dead-letter", "factor"}},
	}
	for _, tt := range tests {
		if tt.err == nil {
			t.Errorf("%s: no error", tt.name)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(tt.err.Error(), w) {
				t.Errorf("%s: error %q does not mention %s", tt.name, tt.err, w)
			}
		}
	}
}

func second[T any](_ T, err error) error { return err }
