package runtime

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A caller's deadline bounds a call whose guest spins, far below the pool's own time limit:
// the shutdown grace of a listener holds even for a binding with a long timeout. The
// instance is replaced and the next call works.
func TestCallHonoursCallerContext(t *testing.T) {
	e := testEngine(t)
	p := guestPool(t, e, "t", PoolConfig{Binding: "b", MinInstances: 1, MaxInstances: 1, Timeout: 10 * time.Second})
	const deadline = 300 * time.Millisecond
	for _, tt := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), deadline)
		}, context.DeadlineExceeded},
		{"cancel", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(deadline, cancel)
			return ctx, cancel
		}, context.Canceled},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := tt.ctx()
			defer cancel()
			before := p.Stats().Discarded
			start := time.Now()
			_, err := p.Call(ctx, &Input{ID: "spin", Body: []byte("loop")})
			took := time.Since(start)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want one wrapping %v", err, tt.want)
			}
			if took > 2*deadline {
				t.Errorf("Call returned after %s, want within 2× the caller's %s", took, deadline)
			}
			if got := p.Stats().Discarded; got != before+1 {
				t.Errorf("discarded = %d, want %d: an interrupted instance must be replaced", got, before+1)
			}
			out, err := p.Call(context.Background(), &Input{ID: "next", Body: []byte("fine")})
			if err != nil || string(out.Outputs[0].Body) != "fine" {
				t.Fatalf("next call: %v %+v", err, out)
			}
		})
	}
}
