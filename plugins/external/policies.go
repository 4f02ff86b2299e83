package external

import (
	"context"
	"errors"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/outcome"
	policyv1 "github.com/wqhost/wqhost/plugins/proto"
)

// backoffPolicy calls the plugin's Backoff, or the fallback.
type backoffPolicy struct{ p *Plugin }

// Next implements listener.Backoff.
func (b *backoffPolicy) Next(ctx context.Context, s listener.IdleState) (time.Duration, bool) {
	p := b.p
	p.calls.Add(1)
	if inst := p.cur.Load(); inst != nil && inst.caps.GetBackoff() {
		cctx, cancel := context.WithTimeout(ctx, p.cfg.CallTimeout)
		resp, err := inst.raw.Backoff.Next(cctx, policyv1.FromIdleState(s))
		cancel()
		if err == nil {
			inst.timeouts.Store(0)
			d, changed := clampDelay(time.Duration(resp.GetDelayNanos()), p.cfg.Limits.MinDelay, p.cfg.Limits.MaxDelay)
			if changed {
				p.clamped.Add(1)
			}
			return d, resp.GetStop()
		}
		p.callFailed(ctx, inst, "Backoff.Next", err)
	}
	p.fallbacks.Add(1)
	return p.fbBackoff.Next(ctx, s)
}

// scalerPolicy calls the plugin's Scaler, or the fallback.
type scalerPolicy struct{ p *Plugin }

// Desired implements listener.Scaler.
func (sc *scalerPolicy) Desired(ctx context.Context, s listener.State) int {
	p := sc.p
	p.calls.Add(1)
	if inst := p.cur.Load(); inst != nil && inst.caps.GetScaler() {
		cctx, cancel := context.WithTimeout(ctx, p.cfg.CallTimeout)
		resp, err := inst.raw.Scaler.Desired(cctx, policyv1.FromState(s))
		cancel()
		if err == nil {
			inst.timeouts.Store(0)
			n, changed := clampWorkers(resp.GetWorkers(), p.cfg.Limits, s)
			if changed {
				p.clamped.Add(1)
			}
			return n
		}
		p.callFailed(ctx, inst, "Scaler.Desired", err)
	}
	p.fallbacks.Add(1)
	return p.fbScaler.Desired(ctx, s)
}

// poisonPolicy calls the plugin's PoisonPolicy, or the fallback.
type poisonPolicy struct{ p *Plugin }

// Decide implements listener.PoisonPolicy.
func (pp *poisonPolicy) Decide(ctx context.Context, f listener.Failure) outcome.Outcome {
	p := pp.p
	p.calls.Add(1)
	if inst := p.cur.Load(); inst != nil && inst.caps.GetPoison() {
		cctx, cancel := context.WithTimeout(ctx, p.cfg.CallTimeout)
		resp, err := inst.raw.Poison.Decide(cctx, policyv1.FromFailure(f))
		cancel()
		if err == nil {
			inst.timeouts.Store(0)
			if d, ok := policyv1.ToDecision(resp); ok {
				if clampDecision(&d, p.cfg.Limits) {
					p.clamped.Add(1)
				}
				return d
			}
			// An action this host does not know: the plugin's answer cannot be honoured.
			p.errs.Add(1)
			p.clamped.Add(1)
		} else {
			p.callFailed(ctx, inst, "PoisonPolicy.Decide", err)
		}
	}
	p.fallbacks.Add(1)
	return p.fbPoison.Decide(ctx, f)
}

func clampDelay(d, lo, hi time.Duration) (time.Duration, bool) {
	orig := d
	if d < 0 {
		d = 0
	}
	if lo > 0 && d < lo {
		d = lo
	}
	if hi > 0 && d > hi {
		d = hi
	}
	return d, d != orig
}

// clampWorkers bounds n by the configured limits, or the listener's own where unset.
func clampWorkers(n int64, l Limits, s listener.State) (int, bool) {
	lo, hi := int64(l.MinWorkers), int64(l.MaxWorkers)
	if lo <= 0 {
		lo = int64(s.MinWorkers)
	}
	if hi <= 0 {
		hi = int64(s.MaxWorkers)
	}
	orig := n
	n = max(n, lo, 0)
	if hi > 0 {
		n = min(n, hi)
	}
	return int(n), n != orig
}

// clampDecision bounds a plugin's answer: a retry's delay by MaxRetryDelay, a dead letter's
// reason by MaxReasonLen.
func clampDecision(d *outcome.Outcome, l Limits) bool {
	changed := false
	if d.Kind == outcome.KindRetry {
		d.After, changed = clampDelay(d.After, 0, l.MaxRetryDelay)
	} else {
		d.After = 0
	}
	if d.Err != nil && len(d.Err.Error()) > l.MaxReasonLen {
		d.Err = errors.New(d.Err.Error()[:l.MaxReasonLen])
		changed = true
	}
	return changed
}

// The defaults below answer only when Start was given no fallback for a policy. They are
// deliberately conservative: keep polling, keep the workers running, retry until the
// dequeue limit.

type defaultBackoff struct{ limits Limits }

func (b defaultBackoff) Next(_ context.Context, s listener.IdleState) (time.Duration, bool) {
	d := 100 * time.Millisecond
	for i := 1; i < s.Idle && d < time.Minute; i++ {
		d *= 2
	}
	d, _ = clampDelay(min(d, time.Minute), b.limits.MinDelay, b.limits.MaxDelay)
	return d, false
}

type defaultScaler struct{}

func (defaultScaler) Desired(_ context.Context, s listener.State) int { return max(s.ActiveWorkers, 1) }

type defaultPoison struct{}

func (defaultPoison) Decide(_ context.Context, f listener.Failure) outcome.Outcome {
	if f.Outcome.Kind == outcome.KindReject || (f.Message != nil && f.MaxDequeueCount > 0 && f.Message.DequeueCount >= f.MaxDequeueCount) {
		return outcome.DeadLetter("")
	}
	if f.Outcome.Kind == outcome.KindRetry && f.Outcome.After > 0 {
		return outcome.Outcome{Kind: outcome.KindRetry, After: f.Outcome.After}
	}
	n := 1
	if f.Message != nil {
		n = max(f.Message.DequeueCount, 1)
	}
	return outcome.Outcome{Kind: outcome.KindRetry, After: time.Duration(n) * time.Second}
}
