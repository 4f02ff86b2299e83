package local

import (
	"context"
	"fmt"
	"slices"
)

// op is one caller's request to the writer. apply runs inside the group transaction and
// returns only storage errors; logical outcomes (lease lost) go in the op's own results.
type op struct {
	apply func(now int64) error
	err   error
	done  chan struct{}
	wakes *Queue // queue whose waiters to wake after commit
}

func (b *Backend) do(ctx context.Context, o *op) error {
	o.done = make(chan struct{})
	select {
	case b.ops <- o:
	case <-b.closed:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-o.done:
		return o.err
	case <-b.done:
		// The writer may have exited with o still buffered.
		select {
		case <-o.done:
			return o.err
		default:
			return ErrClosed
		}
	}
}

func (b *Backend) writer() {
	defer close(b.done)
	group := make([]*op, 0, b.maxGroup)
	for {
		group = group[:0]
		select {
		case o := <-b.ops:
			group = append(group, o)
		case <-b.closed:
			// Finish what is already queued, then stop.
			for {
				select {
				case o := <-b.ops:
					b.commit([]*op{o})
				default:
					return
				}
			}
		}
	fill:
		for len(group) < b.maxGroup {
			select {
			case o := <-b.ops:
				group = append(group, o)
			default:
				break fill
			}
		}
		b.commit(group)
	}
}

func (b *Backend) commit(group []*op) {
	ctx := context.Background()
	now := b.now().UnixNano()
	err := func() error {
		if _, err := b.stmts.begin.Exec(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		for _, o := range group {
			if err := o.apply(now); err != nil {
				if _, rerr := b.stmts.rollback.Exec(); rerr != nil {
					b.log.Error("local queue store: rollback", "path", b.path, "err", rerr)
				}
				return err
			}
		}
		if _, err := b.stmts.commit.Exec(); err != nil {
			if _, rerr := b.stmts.rollback.Exec(); rerr != nil {
				b.log.Debug("local queue store: rollback after failed commit", "path", b.path, "err", rerr)
			}
			return fmt.Errorf("commit: %w", err)
		}
		return nil
	}()
	if err != nil {
		err = fmt.Errorf("local: %s: group of %d operations: %w", b.path, len(group), err)
	}
	var woken []*Queue // few queues per group: a slice beats a map
	for _, o := range group {
		if err != nil {
			o.err = err
		}
		if err == nil && o.wakes != nil && !slices.Contains(woken, o.wakes) {
			woken = append(woken, o.wakes)
			o.wakes.broadcast()
		}
		close(o.done)
	}
	b.commits++
	if b.commits%4096 == 0 {
		// Return free pages to the file system bit by bit; auto_vacuum is INCREMENTAL.
		if _, err := b.wconn.ExecContext(ctx, "PRAGMA incremental_vacuum(2048)"); err != nil {
			b.log.Warn("local queue store: incremental vacuum", "path", b.path, "err", err)
		}
	}
}

func (b *Backend) nextLease() int64 { return b.lease.Add(1) }
