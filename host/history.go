package host

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/runtime"
)

// What the console shows of a binding beyond its status: the module versions it ran (its
// hot-swap history, with the failure rate of each since it was swapped in), its last scaling
// decisions and its idle cost. Each is a small bounded ring kept per binding, reset when a
// config reload rebuilds the binding.
const (
	// maxVersionHistory bounds a binding's hot-swap history.
	maxVersionHistory = 16
	// maxScalingDecisions bounds a binding's ring of scaling decisions.
	maxScalingDecisions = 64
	// scalingRepeatEvery is how often an unchanged scaler answer is recorded again, so the
	// ring shows the scaler was still asked while nothing changed.
	scalingRepeatEvery = 10 * time.Second
)

// ErrNoPreviousVersion reports a rollback of a binding that ran no earlier module version
// since it was built.
var ErrNoPreviousVersion = errors.New("no previous module version to roll back to")

// Causes of a version becoming the serving one.
const (
	SwapStart    = "start"    // the binding was built with it
	SwapReload   = "reload"   // a reload of a changed module file swapped it in
	SwapRollback = "rollback" // a rollback re-activated it
)

// VersionRecord is one module version a binding ran: when it was swapped in (and out), why,
// and its messages since then. FailureRate is Failed / (Processed + Failed): failed handler
// calls among those settled while the version served.
type VersionRecord struct {
	Digest      string     `json:"digest"`
	Cause       string     `json:"cause"`
	SwappedIn   time.Time  `json:"swapped_in"`
	SwappedOut  *time.Time `json:"swapped_out,omitempty"`
	Serving     bool       `json:"serving"`
	Processed   uint64     `json:"processed"`
	Failed      uint64     `json:"failed"`
	FailureRate float64    `json:"failure_rate"`
	// Rollback marks the version a rollback would re-activate now.
	Rollback bool `json:"rollback_target,omitempty"`

	// The listener's counters when it was swapped in and out.
	p0, f0, p1, f1 uint64
	// module is kept for the version a rollback would re-activate only, so that a binding
	// holds at most one compiled version beside the serving one.
	module *runtime.Module
}

// ScalingDecision is one answer of a binding's scaler: the depth and workers it saw and the
// workers it asked for (before the listener's clamp to min..max_workers).
type ScalingDecision struct {
	At      time.Time `json:"at"`
	Depth   int64     `json:"depth"`
	Workers int       `json:"workers"`
	Desired int       `json:"desired"`
}

// history is a binding's hot-swap history and scaling ring. Its lock is a leaf.
type history struct {
	mu       sync.Mutex
	created  time.Time
	versions []VersionRecord // oldest first, the serving one last
	scaling  []ScalingDecision
	// rolledBackFrom is the digest a rollback replaced: a reload finding that digest in the
	// module file again leaves the rollback serving (see Host.Rollback).
	rolledBackFrom string
}

// started records the version the binding was built with.
func (hs *history) started(m *runtime.Module, at time.Time) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.created = at
	hs.versions = []VersionRecord{{Digest: m.Digest(), Cause: SwapStart, SwappedIn: at, Serving: true, module: m}}
}

// swapped records that m serves from at, for cause, with the listener's counters at that
// moment. Only the version swapped out keeps its module (the rollback target).
func (hs *history) swapped(m *runtime.Module, cause string, at time.Time, ls listener.State) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	for i := range hs.versions {
		v := &hs.versions[i]
		if !v.Serving {
			v.module = nil
			continue
		}
		// The version swapped out keeps its module: it is the rollback target now.
		v.Serving, v.SwappedOut, v.p1, v.f1 = false, &at, ls.Processed, ls.Failed
	}
	hs.versions = append(hs.versions, VersionRecord{
		Digest: m.Digest(), Cause: cause, SwappedIn: at, Serving: true, p0: ls.Processed, f0: ls.Failed, module: m,
	})
	if n := len(hs.versions) - maxVersionHistory; n > 0 {
		hs.versions = slices.Delete(hs.versions, 0, n)
	}
	if cause != SwapRollback {
		hs.rolledBackFrom = ""
	}
}

// previous is the module a rollback re-activates: the last version swapped out, if it is
// not the serving one's digest.
func (hs *history) previous() (*runtime.Module, string) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.previousLocked()
}

func (hs *history) previousLocked() (*runtime.Module, string) {
	cur := ""
	for i := len(hs.versions) - 1; i >= 0; i-- {
		v := hs.versions[i]
		if v.Serving {
			cur = v.Digest
			continue
		}
		if v.module != nil && v.Digest != cur {
			return v.module, v.Digest
		}
	}
	return nil, ""
}

// snapshot returns the history with the serving version's counts up to ls.
func (hs *history) snapshot(ls listener.State) ([]VersionRecord, []ScalingDecision, string, time.Time) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	out := make([]VersionRecord, len(hs.versions))
	copy(out, hs.versions)
	_, target := hs.previousLocked()
	for i := range out {
		v := &out[i]
		p1, f1 := v.p1, v.f1
		if v.Serving {
			p1, f1 = ls.Processed, ls.Failed
		}
		v.Processed, v.Failed = p1-min(v.p0, p1), f1-min(v.f0, f1)
		if n := v.Processed + v.Failed; n > 0 {
			v.FailureRate = float64(v.Failed) / float64(n)
		}
		v.Rollback = target != "" && v.module != nil && v.Digest == target && !v.Serving
		v.module = nil
	}
	return out, slices.Clone(hs.scaling), hs.rolledBackFrom, hs.created
}

// decided records a scaler's answer: a change of the answer, or the same one after
// scalingRepeatEvery.
func (hs *history) decided(d ScalingDecision) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if n := len(hs.scaling); n > 0 {
		last := hs.scaling[n-1]
		if last.Desired == d.Desired && last.Workers == d.Workers && d.At.Sub(last.At) < scalingRepeatEvery {
			return
		}
	}
	hs.scaling = append(hs.scaling, d)
	if n := len(hs.scaling) - maxScalingDecisions; n > 0 {
		hs.scaling = slices.Delete(hs.scaling, 0, n)
	}
}

// last returns the last scaling decision recorded, or nil.
func (hs *history) last() *ScalingDecision {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if n := len(hs.scaling); n > 0 {
		d := hs.scaling[n-1]
		return &d
	}
	return nil
}

// recordingScaler records the answers of the binding's scaler in its history.
type recordingScaler struct {
	inner listener.Scaler
	hist  *history
}

func (r recordingScaler) Desired(ctx context.Context, s listener.State) int {
	n := r.inner.Desired(ctx, s)
	r.hist.decided(ScalingDecision{At: time.Now(), Depth: s.Depth, Workers: s.ActiveWorkers, Desired: n})
	return n
}

// rollback re-activates the binding's previous module version: its compiled module (kept,
// not recompiled) gets a fresh warm pool, and is swapped in as a reload swaps.
func (b *binding) rollback(ctx context.Context) (BindingReload, error) {
	b.reloadMu.Lock()
	defer b.reloadMu.Unlock()
	res := BindingReload{Tenant: b.tenant.name, Binding: b.name, Result: ReloadFailed}
	cur := b.cur.Load()
	res.Digest = cur.module.Digest()
	m, digest := b.hist.previous()
	if m == nil {
		return res, fmt.Errorf("tenants.%s.bindings.%s: %w", b.tenant.name, b.name, ErrNoPreviousVersion)
	}
	pc := b.poolConfig()
	if err := b.tenant.rt.Validate(ctx, m, pc); err != nil {
		return res, fmt.Errorf("rollback to %s: %w", digest[:12], err)
	}
	p, err := b.tenant.rt.NewPool(ctx, m, pc)
	if err != nil {
		return res, fmt.Errorf("rollback to %s: %w", digest[:12], err)
	}
	b.swapAs(&version{module: m, pool: p, loadedAt: time.Now(), drained: make(chan struct{})}, SwapRollback)
	b.hist.mu.Lock()
	b.hist.rolledBackFrom = res.Digest
	b.hist.mu.Unlock()
	b.log.Info("module rolled back", "module", b.cfg.Module, "from", res.Digest[:12], "to", digest[:12])
	res.Result, res.Digest = SwapRollback, digest
	return res, nil
}

// keepsRollback reports whether a reload reading digest from the module file must leave a
// rollback serving: the file still holds the version the rollback replaced.
func (b *binding) keepsRollback(digest string) bool {
	b.hist.mu.Lock()
	defer b.hist.mu.Unlock()
	return b.hist.rolledBackFrom != "" && b.hist.rolledBackFrom == digest
}

// settleRollback forgets the version a rollback replaced once the module file holds the
// serving bytes (agrees), so a later upload of that version is swapped in again.
func (b *binding) settleRollback(agrees bool) {
	if !agrees {
		return
	}
	b.hist.mu.Lock()
	defer b.hist.mu.Unlock()
	b.hist.rolledBackFrom = ""
}
