package azure

import (
	"context"
	"fmt"
	"maps"
	"strconv"

	"github.com/wqhost/wqhost/listener/queue"
)

var _ queue.Releaser = (*Queue)(nil)

// Release implements queue.Releaser. Azure's dequeueCount cannot be lowered, so the release
// is recorded in the message itself: an update (visible at once) that rewrites its
// envelope with queue.AttrReleased one higher, which the next receive takes out of the
// dequeue count (uncountReleases). The message keeps its place: Azure has no order to
// lose.
func (q *Queue) Release(ctx context.Context, m *queue.Message) error {
	if m.LeaseToken == "" {
		return fmt.Errorf("azure: release %s message %s: already released: %w", q.name, m.ID, queue.ErrLeaseLost)
	}
	attrs := maps.Clone(m.Attributes)
	if attrs == nil {
		attrs = map[string]string{}
	}
	attrs[queue.AttrReleased] = strconv.Itoa(releasesOf(m) + 1)
	was := m.Attributes
	m.Attributes = attrs
	if err := q.UpdateVisibility(ctx, m, 0); err != nil {
		m.Attributes = was
		return err
	}
	// The pop receipt would still update the visible message: a second release would
	// count twice.
	m.LeaseToken = ""
	return nil
}

// uncountReleases takes the deliveries released unstarted (queue.AttrReleased) out of a
// received message's dequeue count, which stays at least 1 (this receive).
func uncountReleases(m *queue.Message) {
	if n := releasesOf(m); n > 0 {
		m.DequeueCount = max(m.DequeueCount-n, 1)
	}
}

// releasesOf is m's queue.AttrReleased, 0 when absent or bad.
func releasesOf(m *queue.Message) int {
	n, err := strconv.Atoi(m.Attributes[queue.AttrReleased])
	if err != nil || n < 0 {
		return 0
	}
	return n
}
