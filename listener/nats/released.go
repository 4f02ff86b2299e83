package nats

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/wqhost/wqhost/listener/queue"
)

// Releases of ordered messages are counted in JetStream, beside the queue: a message of an
// order group cannot be released as a copy (the copy would go to the end of its group), so
// it is Nak'ed and its NumDelivered rises. The release is recorded first in a key-value
// bucket of the queue's stream, <stream>_released (stream KV_<stream>_released), under the
// message's stream sequence, value "<releases> <stored at, unix ns>"; a receive of a group
// message delivered before (NumDelivered > 1) reads its key and takes the releases out of
// the dequeue count. The bucket lives in JetStream, so every host reading the queue shares
// it and a host restart keeps it. The key is deleted when the message is acked or
// dead-lettered; the bucket's max age is a backstop for keys whose message went another way
// (expired, purged, acked by a host that did not read the key).
//
// The bucket is best effort: when it fails (an outage, a bucket deleted or refused), the
// release is a plain Nak and the receive keeps NumDelivered, so the count rises as it would
// without it: never a lost message nor a blocked release. After a failure the bucket is
// left alone for releasedRest, so a stop releasing many messages during an outage does not
// wait releasedTry for each.

// releasedTry bounds one use of the bucket (a count, a read, a delete).
const releasedTry = 2 * time.Second

// releasedRest is how long the bucket is left alone after a failure.
const releasedRest = 5 * time.Second

// releasedMaxAge is the bucket's max age when the stream has none. A key outliving it
// (a message released, then waiting this long in its group) is dropped and the message's
// count rises by its releases, as without the bucket.
const releasedMaxAge = 7 * 24 * time.Hour

// errResting is a use of the bucket skipped while it rests after a failure.
var errResting = errors.New("left alone after a failure")

// releaseCounts is a queue's handle on its bucket of release counts.
type releaseCounts struct {
	mu     sync.Mutex
	kv     jetstream.KeyValue // nil until found or created
	rest   time.Time          // the bucket is left alone until then, after a failure
	warned bool               // a failure was logged; cleared by the next success
}

// releasedBucket names the bucket of a stream's release counts.
func releasedBucket(stream string) string {
	for i := 0; i < len(stream); i++ {
		c := stream[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return streamName(stream) + "_released"
		}
	}
	return stream + "_released"
}

// inGroup reports whether a message delivered on subject is one of an order group, whose
// releases are counted in the bucket (the queue's shared consumer reads its subject alone).
func (q *Queue) inGroup(subject string) bool { return q.ordered && subject != q.subject }

// releasedKV returns the queue's bucket, creating it when create is set. It fails at once
// while the bucket rests after a failure.
func (q *Queue) releasedKV(ctx context.Context, create bool) (jetstream.KeyValue, error) {
	r := &q.rel
	r.mu.Lock()
	kv, rest := r.kv, r.rest
	r.mu.Unlock()
	if time.Now().Before(rest) {
		return nil, errResting
	}
	if kv != nil {
		return kv, nil
	}
	bucket := releasedBucket(q.streamName)
	kv, err := q.b.js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) && create {
		info := q.stream.CachedInfo().Config
		cfg := jetstream.KeyValueConfig{
			Bucket:      bucket,
			Description: "wqhost: releases of the ordered messages of stream " + q.streamName + " (not attempts)",
			History:     1,
			TTL:         releasedMaxAge,
			Storage:     info.Storage,
			Replicas:    max(info.Replicas, 1),
		}
		// A key is written after its message was stored: it need not outlive the
		// stream's own max age.
		if info.MaxAge > 0 {
			cfg.TTL = info.MaxAge
		}
		kv, err = q.b.js.CreateKeyValue(ctx, cfg)
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = q.b.js.KeyValue(ctx, bucket) // made by another host meanwhile
		}
	}
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.kv = kv
	r.mu.Unlock()
	return kv, nil
}

// releasedFailed logs a failure of the bucket once until it works again, and rests it.
func (q *Queue) releasedFailed(what string, err error) {
	if errors.Is(err, errResting) {
		return
	}
	r := &q.rel
	r.mu.Lock()
	r.rest = time.Now().Add(releasedRest)
	r.kv = nil // looked up again: the bucket may have been deleted and made anew
	warn := !r.warned
	r.warned = true
	r.mu.Unlock()
	if warn {
		q.b.log.Warn("nats: release counts unavailable: releases of ordered messages count as deliveries until they are back",
			"queue", q.name, "bucket", releasedBucket(q.streamName), "while", what, "err", err)
	}
}

// releasedOK notes a use of the bucket that worked.
func (q *Queue) releasedOK() {
	r := &q.rel
	r.mu.Lock()
	was := r.warned
	r.warned = false
	r.mu.Unlock()
	if was {
		q.b.log.Info("nats: release counts available again", "queue", q.name, "bucket", releasedBucket(q.streamName))
	}
}

// releasedValue is a key's value: the releases, and the message's store time, which tells a
// key of a stream deleted and made anew (whose sequences start again) from the message's own.
func releasedValue(n int, at time.Time) []byte {
	return fmt.Appendf(nil, "%d %d", n, at.UnixNano())
}

// parseReleased returns the releases a key's value records for a message stored at at: 0 for
// another message's key or a value not of this form.
func parseReleased(v []byte, at time.Time) int {
	ns, ts, ok := strings.Cut(string(v), " ")
	n, err := strconv.Atoi(ns)
	if !ok || err != nil || n < 0 || ts != strconv.FormatInt(at.UnixNano(), 10) {
		return 0
	}
	return n
}

// readReleases reads the release counts of the group messages in ds delivered before
// (NumDelivered > 1): a first delivery has none, so the normal path pays no read. A failure
// leaves the rest at 0 (their dequeue counts are NumDelivered).
func (q *Queue) readReleases(ctx context.Context, ds []delivery) {
	for i := range ds {
		d := &ds[i]
		if d.received < 2 || !q.inGroup(d.msg.Subject) {
			continue
		}
		if err := q.readRelease(ctx, d); err != nil {
			if ctx.Err() != nil {
				return // the caller gave up: not the bucket's failure
			}
			q.releasedFailed("reading the releases of message "+strconv.FormatUint(d.seq, 10), err)
			return
		}
	}
}

func (q *Queue) readRelease(ctx context.Context, d *delivery) error {
	ctx, cancel := context.WithTimeout(ctx, releasedTry)
	defer cancel()
	kv, err := q.releasedKV(ctx, false)
	switch {
	case errors.Is(err, jetstream.ErrBucketNotFound):
		// Nothing was ever released.
	case err != nil:
		return err
	default:
		e, err := kv.Get(ctx, strconv.FormatUint(d.seq, 10))
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return err
		default:
			d.releases, d.releasesRev = parseReleased(e.Value(), d.at), e.Revision()
		}
	}
	d.releasesRead = true
	q.releasedOK()
	return nil
}

// countRelease adds one to the releases of l's message in the bucket (compare-and-set on
// the key's revision, again on a conflict). It starts from what the receive read; a first
// delivery has no key yet.
func (q *Queue) countRelease(ctx context.Context, l *lease) error {
	ctx, cancel := context.WithTimeout(ctx, releasedTry)
	defer cancel()
	kv, err := q.releasedKV(ctx, true)
	if err != nil {
		return err
	}
	key := strconv.FormatUint(l.seq, 10)
	n, rev, known := l.releases, l.releasesRev, l.releasesRead || l.delivered == 1
	for try := 0; ; try++ {
		if !known {
			e, err := kv.Get(ctx, key)
			switch {
			case errors.Is(err, jetstream.ErrKeyNotFound):
				n, rev = 0, 0
			case err != nil:
				return err
			default:
				n, rev = parseReleased(e.Value(), l.at), e.Revision()
			}
		}
		if rev == 0 {
			_, err = kv.Create(ctx, key, releasedValue(n+1, l.at))
		} else {
			_, err = kv.Update(ctx, key, releasedValue(n+1, l.at), rev)
		}
		conflict := errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch)
		if !conflict || try == 4 {
			if err == nil {
				q.releasedOK()
			}
			return err
		}
		known = false
	}
}

// forgetReleases deletes the key of a settled message whose releases the receive read, best
// effort (the bucket's max age is the backstop).
func (q *Queue) forgetReleases(ctx context.Context, l *lease) {
	if l.releases == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releasedTry)
	defer cancel()
	kv, err := q.releasedKV(ctx, false)
	if err == nil {
		err = kv.Purge(ctx, strconv.FormatUint(l.seq, 10))
	}
	if err != nil {
		q.b.log.Debug("nats: delete the release count of a settled message; the bucket's max age drops it", "queue", q.name, "seq", l.seq, "err", err)
	}
}

// releaseInGroup releases a message of an order group: its release counted in the bucket
// first, so that the next receive (on any host) sees it, then a Nak, which keeps its place
// at the head of its group. Without the bucket it is a plain Nak (the count rises).
func (q *Queue) releaseInGroup(ctx context.Context, m *queue.Message, l *lease) error {
	if err := q.countRelease(ctx, l); err != nil && ctx.Err() == nil {
		q.releasedFailed("counting the release of message "+m.ID, err)
	}
	if _, err := q.leaseOf(m, true); err != nil {
		return err
	}
	if err := q.ackSync(ctx, l.reply, ackNak); err != nil {
		q.restore(m.ID, l)
		return fmt.Errorf("nats: release %s in %s: nak: %w", m.ID, q.name, err)
	}
	m.LeaseToken = ""
	q.noteWrite()
	return nil
}
