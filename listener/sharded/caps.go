package sharded

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/wqhost/wqhost/listener/queue"
)

// Capabilities implements queue.Advertiser: the capabilities every shard has (ordered
// receive, scans and sweeps only over one shard).
func (q *Queue) Capabilities() queue.Caps {
	cs := queue.CapAll
	for _, s := range q.shards {
		cs &= queue.Of(s)
	}
	if len(q.shards) > 1 {
		cs &^= queue.CapOrdered | queue.CapScan | queue.CapSweep
	}
	return cs
}

// DeleteBatch implements queue.Batcher: one batch per shard.
func (q *Queue) DeleteBatch(ctx context.Context, ms []*queue.Message) []error {
	errs := make([]error, len(ms))
	byShard := map[string][]int{}
	for i, m := range ms {
		if _, err := q.shardOf(m); err != nil {
			errs[i] = err
			continue
		}
		byShard[m.Queue] = append(byShard[m.Queue], i)
	}
	for name, idx := range byShard {
		b, ok := queue.As[queue.Batcher](q.byName[name])
		part := make([]*queue.Message, len(idx))
		for j, i := range idx {
			part[j] = ms[i]
		}
		var perr []error
		if ok {
			perr = b.DeleteBatch(ctx, part)
		} else {
			perr = make([]error, len(part))
			for j, m := range part {
				perr[j] = q.byName[name].Delete(ctx, m)
			}
		}
		for j, i := range idx {
			errs[i] = perr[j]
		}
	}
	return errs
}

// ReceiveLimited implements queue.BodyLimiter over the shards' own.
func (q *Queue) ReceiveLimited(ctx context.Context, max int, visibility time.Duration, maxBody int64) ([]*queue.Message, error) {
	return q.receive(ctx, min(max, queue.MaxBatch), func(s queue.Queue, n int) ([]*queue.Message, error) {
		b, ok := queue.As[queue.BodyLimiter](s)
		if !ok {
			return nil, errors.ErrUnsupported
		}
		return b.ReceiveLimited(ctx, n, visibility, maxBody)
	})
}

// Wait implements queue.Waiter: it returns when any shard's wait does.
func (q *Queue) Wait(ctx context.Context, d time.Duration) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, len(q.shards))
	for _, s := range q.shards {
		w, ok := queue.As[queue.Waiter](s)
		if !ok {
			return errors.ErrUnsupported
		}
		go func() { done <- w.Wait(wctx, d) }()
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
	return ctx.Err()
}

// WatchFunc implements queue.FuncWatcher: fn runs once, on the first write to any shard.
func (q *Queue) WatchFunc(ctx context.Context, fn func()) (time.Duration, func(), error) {
	var once sync.Once
	call := func() { once.Do(fn) }
	stops := make([]func(), 0, len(q.shards))
	stopAll := func() {
		for _, stop := range stops {
			stop()
		}
	}
	visible := time.Duration(-1)
	for _, s := range q.shards {
		w, ok := queue.As[queue.FuncWatcher](s)
		if !ok {
			stopAll()
			return 0, func() {}, errors.ErrUnsupported
		}
		in, stop, err := w.WatchFunc(ctx, call)
		if err != nil {
			stopAll()
			return 0, func() {}, err
		}
		stops = append(stops, stop)
		visible = sooner(visible, in)
	}
	return visible, stopAll, nil
}

// Watch implements queue.Watcher: the channel closes on the first write to any shard. Over
// shards that call back (FuncWatcher) it is closed in the writer's goroutine, as a single
// queue's would be; otherwise one goroutine per shard forwards its channel until stop.
func (q *Queue) Watch(ctx context.Context) (<-chan struct{}, time.Duration, func(), error) {
	if queue.Of(q)&queue.CapWatchFunc != 0 {
		ch := make(chan struct{})
		in, stop, err := q.WatchFunc(ctx, func() { close(ch) })
		if err != nil {
			return nil, 0, func() {}, err
		}
		return ch, in, stop, nil
	}
	changed, quit := make(chan struct{}), make(chan struct{})
	var once, stopOnce sync.Once
	var stops []func()
	stopAll := func() {
		stopOnce.Do(func() {
			close(quit)
			for _, stop := range stops {
				stop()
			}
		})
	}
	visible := time.Duration(-1)
	for _, s := range q.shards {
		w, ok := queue.As[queue.Watcher](s)
		if !ok {
			stopAll()
			return nil, 0, func() {}, errors.ErrUnsupported
		}
		ch, in, stop, err := w.Watch(ctx)
		if err != nil {
			stopAll()
			return nil, 0, func() {}, err
		}
		stops = append(stops, stop)
		visible = sooner(visible, in)
		go func() {
			select {
			case <-ch:
				once.Do(func() { close(changed) })
			case <-quit:
			}
		}()
	}
	return changed, visible, stopAll, nil
}

// sooner combines two visibleIn answers (-1: only a write makes a message visible).
func sooner(a, b time.Duration) time.Duration {
	switch {
	case a < 0:
		return b
	case b < 0:
		return a
	}
	return min(a, b)
}

// MoveTo implements queue.Mover with m's shard's own. A sharded dst is resolved to its shard
// of the same index, so shard i of an input dead-letters into shard i of its poison queue.
func (q *Queue) MoveTo(ctx context.Context, m *queue.Message, dst queue.Queue, body []byte, opts queue.SendOptions) error {
	s, err := q.shardOf(m)
	if err != nil {
		return err
	}
	mv, ok := queue.As[queue.Mover](s)
	if !ok {
		return errors.ErrUnsupported
	}
	dst = queue.Unwrap(dst)
	if sd, ok := dst.(*Queue); ok {
		dst = sd.shards[slices.Index(q.shards, s)%len(sd.shards)]
	}
	return mv.MoveTo(ctx, m, dst, body, opts)
}

// Renew implements queue.Renewer with m's shard's own.
func (q *Queue) Renew(ctx context.Context, m *queue.Message, d time.Duration) error {
	s, err := q.shardOf(m)
	if err != nil {
		return err
	}
	r, ok := queue.As[queue.Renewer](s)
	if !ok {
		return errors.ErrUnsupported
	}
	return r.Renew(ctx, m, d)
}

// ReceiveOrdered implements queue.OrderedReceiver over a single shard.
func (q *Queue) ReceiveOrdered(ctx context.Context, max int, visibility time.Duration, maxBody int64) ([]*queue.Message, time.Time, error) {
	r, ok := queue.As[queue.OrderedReceiver](q.shards[0])
	if !ok || len(q.shards) > 1 {
		return nil, time.Time{}, errors.ErrUnsupported
	}
	return r.ReceiveOrdered(ctx, max, visibility, maxBody)
}

// Peek implements queue.Peeker: up to max messages of all shards, the soonest visible first.
func (q *Queue) Peek(ctx context.Context, max int) ([]*queue.Message, error) {
	var out []*queue.Message
	for _, s := range q.shards {
		p, ok := queue.As[queue.Peeker](s)
		if !ok {
			return nil, errors.ErrUnsupported
		}
		ms, err := p.Peek(ctx, max)
		if err != nil {
			return nil, err
		}
		out = append(out, ms...)
	}
	slices.SortStableFunc(out, func(a, b *queue.Message) int {
		return cmp.Or(a.VisibleAt.Compare(b.VisibleAt), a.InsertedAt.Compare(b.InsertedAt))
	})
	if max > 0 && len(out) > max {
		out = out[:max]
	}
	return out, nil
}

// Counts implements queue.Counter: the sums over the shards.
func (q *Queue) Counts(ctx context.Context) (queue.Counts, error) {
	var sum queue.Counts
	for _, s := range q.shards {
		c, ok := queue.As[queue.Counter](s)
		if !ok {
			return queue.Counts{}, errors.ErrUnsupported
		}
		n, err := c.Counts(ctx)
		if err != nil {
			return queue.Counts{}, err
		}
		sum.Visible += n.Visible
		sum.Leased += n.Leased
		sum.Delayed += n.Delayed
	}
	return sum, nil
}

// MaxMessageBytes implements queue.MessageLimiter: the smallest limit of the shards (0 when
// none reports one). A message sent to the logical queue may land on any shard.
func (q *Queue) MaxMessageBytes() int {
	limit := 0
	for _, s := range q.shards {
		if l, ok := queue.As[queue.MessageLimiter](s); ok {
			if n := l.MaxMessageBytes(); n > 0 && (limit == 0 || n < limit) {
				limit = n
			}
		}
	}
	return limit
}
