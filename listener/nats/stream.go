package nats

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/wqhost/wqhost/listener/queue"
)

// checkStream checks a stream that existed before Open: the host relies on its settings, so
// it does not take them on trust. A retention other than work-queue keeps every handled
// message in the stream (and, with interest retention, may drop unacked ones): refused. Fewer
// replicas than the config's replicas: raised with UpdateStream (JetStream moves a stream to
// more peers online), and refused, naming the server's answer, when that fails. With
// AdoptStreams the stream is used as it is, the difference logged.
func (b *Backend) checkStream(ctx context.Context, name string, s jetstream.Stream) (jetstream.Stream, error) {
	cfg := s.CachedInfo().Config
	var problems []string
	if cfg.Retention != jetstream.WorkQueuePolicy {
		problems = append(problems, fmt.Sprintf("retention is %s, not workqueue: handled messages would stay in it", cfg.Retention))
	}
	raise := cfg.Replicas < b.opts.Replicas
	if raise && b.opts.AdoptStreams {
		problems = append(problems, fmt.Sprintf("it has %d replicas, replicas is %d", cfg.Replicas, b.opts.Replicas))
	}
	if b.opts.AdoptStreams {
		if len(problems) > 0 {
			b.log.Warn("nats: stream adopted as it is (adopt_streams)", "queue", name, "stream", cfg.Name, "differences", problems)
		}
		return s, nil
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("nats: queue %q: stream %s: %s (recreate it with retention workqueue, or set adopt_streams: true to use it as it is)", name, cfg.Name, problems[0])
	}
	if !raise {
		return s, nil
	}
	from := cfg.Replicas
	cfg.Replicas = b.opts.Replicas
	var up jetstream.Stream
	err := retryAPI(ctx, func(ctx context.Context) (err error) {
		up, err = b.js.UpdateStream(ctx, cfg)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("nats: queue %q: stream %s has %d replicas, replicas is %d, and raising them failed (run enough JetStream servers, lower replicas, or set adopt_streams: true): %w", name, cfg.Name, from, b.opts.Replicas, unavailable(err))
	}
	b.log.Info("nats: stream replicas raised", "queue", name, "stream", cfg.Name, "from", from, "to", b.opts.Replicas)
	// Until the new peers caught up the stream refuses a consumer ("insufficient resources").
	start := time.Now()
	for !caughtUp(ctx, up, b.opts.Replicas) {
		if time.Since(start) > apiRetryFor {
			return nil, fmt.Errorf("nats: queue %q: stream %s: its %d replicas were not current %s after raising them: %w", name, cfg.Name, b.opts.Replicas, apiRetryFor, queue.ErrUnavailable)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	return up, nil
}

// caughtUp reports whether stream s has a leader and replicas-1 current followers.
func caughtUp(ctx context.Context, s jetstream.Stream, replicas int) bool {
	ctx, cancel := context.WithTimeout(ctx, apiTry)
	defer cancel()
	info, err := s.Info(ctx)
	if err != nil || info.Cluster == nil || info.Cluster.Leader == "" || len(info.Cluster.Replicas) < replicas-1 {
		return false
	}
	for _, r := range info.Cluster.Replicas {
		if !r.Current {
			return false
		}
	}
	return true
}
