package queue

import (
	"context"
	"errors"
	"time"
)

// Decorator is embedded by a wrapper of one queue (a counting or metrics decorator): it
// forwards Queue and every capability to Inner and advertises Inner's capabilities, so the
// wrapper loses none; it overrides the methods it changes. A forwarded capability that
// Inner lacks fails with errors.ErrUnsupported (MaxMessageBytes returns 0), but As never
// hands it out.
type Decorator struct {
	Queue
}

// Capabilities implements Advertiser: Inner's capabilities.
func (d Decorator) Capabilities() Caps { return Of(d.Queue) }

// DeleteBatch forwards to Inner's Batcher.
func (d Decorator) DeleteBatch(ctx context.Context, ms []*Message) []error {
	if b, ok := As[Batcher](d.Queue); ok {
		return b.DeleteBatch(ctx, ms)
	}
	errs := make([]error, len(ms))
	for i := range errs {
		errs[i] = errors.ErrUnsupported
	}
	return errs
}

// ReceiveLimited forwards to Inner's BodyLimiter.
func (d Decorator) ReceiveLimited(ctx context.Context, max int, visibility time.Duration, maxBody int64) ([]*Message, error) {
	if b, ok := As[BodyLimiter](d.Queue); ok {
		return b.ReceiveLimited(ctx, max, visibility, maxBody)
	}
	return nil, errors.ErrUnsupported
}

// Wait forwards to Inner's Waiter.
func (d Decorator) Wait(ctx context.Context, dur time.Duration) error {
	if w, ok := As[Waiter](d.Queue); ok {
		return w.Wait(ctx, dur)
	}
	return errors.ErrUnsupported
}

// Watch forwards to Inner's Watcher.
func (d Decorator) Watch(ctx context.Context) (<-chan struct{}, time.Duration, func(), error) {
	if w, ok := As[Watcher](d.Queue); ok {
		return w.Watch(ctx)
	}
	return nil, 0, func() {}, errors.ErrUnsupported
}

// WatchFunc forwards to Inner's FuncWatcher.
func (d Decorator) WatchFunc(ctx context.Context, fn func()) (time.Duration, func(), error) {
	if w, ok := As[FuncWatcher](d.Queue); ok {
		return w.WatchFunc(ctx, fn)
	}
	return 0, func() {}, errors.ErrUnsupported
}

// Unwrap returns the decorated queue.
func (d Decorator) Unwrap() Queue { return d.Queue }

// MoveTo forwards to Inner's Mover, with dst unwrapped of its decorators (Unwrap) so that a
// decorated dead-letter queue of the same store still takes the one-transaction move.
func (d Decorator) MoveTo(ctx context.Context, m *Message, dst Queue, body []byte, opts SendOptions) error {
	dst = Unwrap(dst)
	if mv, ok := As[Mover](d.Queue); ok {
		return mv.MoveTo(ctx, m, dst, body, opts)
	}
	return errors.ErrUnsupported
}

// Renew forwards to Inner's Renewer.
func (d Decorator) Renew(ctx context.Context, m *Message, dur time.Duration) error {
	if r, ok := As[Renewer](d.Queue); ok {
		return r.Renew(ctx, m, dur)
	}
	return errors.ErrUnsupported
}

// ReceiveOrdered forwards to Inner's OrderedReceiver.
func (d Decorator) ReceiveOrdered(ctx context.Context, max int, visibility time.Duration, maxBody int64) ([]*Message, time.Time, error) {
	if r, ok := As[OrderedReceiver](d.Queue); ok {
		return r.ReceiveOrdered(ctx, max, visibility, maxBody)
	}
	return nil, time.Time{}, errors.ErrUnsupported
}

// Peek forwards to Inner's Peeker.
func (d Decorator) Peek(ctx context.Context, max int) ([]*Message, error) {
	if p, ok := As[Peeker](d.Queue); ok {
		return p.Peek(ctx, max)
	}
	return nil, errors.ErrUnsupported
}

// Release forwards to Inner's Releaser.
func (d Decorator) Release(ctx context.Context, m *Message) error {
	if r, ok := As[Releaser](d.Queue); ok {
		return r.Release(ctx, m)
	}
	return errors.ErrUnsupported
}

// Counts forwards to Inner's Counter.
func (d Decorator) Counts(ctx context.Context) (Counts, error) {
	if c, ok := As[Counter](d.Queue); ok {
		return c.Counts(ctx)
	}
	return Counts{}, errors.ErrUnsupported
}

// MaxMessageBytes forwards to Inner's MessageLimiter (0 without one: no limit known).
func (d Decorator) MaxMessageBytes() int {
	if l, ok := As[MessageLimiter](d.Queue); ok {
		return l.MaxMessageBytes()
	}
	return 0
}

// Scan forwards to Inner's Scanner.
func (d Decorator) Scan(ctx context.Context, o ScanOptions, fn func(m *Message, size int64) error) (string, error) {
	if s, ok := As[Scanner](d.Queue); ok {
		return s.Scan(ctx, o, fn)
	}
	return "", errors.ErrUnsupported
}

// CountMatching forwards to Inner's Scanner.
func (d Decorator) CountMatching(ctx context.Context, f Filter) (int64, error) {
	if s, ok := As[Scanner](d.Queue); ok {
		return s.CountMatching(ctx, f)
	}
	return 0, errors.ErrUnsupported
}

// Sweep forwards to Inner's Sweeper. Its walk's MoveTo is the inner store's, which unwraps
// a decorated dst (Unwrap).
func (d Decorator) Sweep(ctx context.Context, f Filter) (Sweep, int64, error) {
	if s, ok := As[Sweeper](d.Queue); ok {
		return s.Sweep(ctx, f)
	}
	return nil, 0, errors.ErrUnsupported
}
