package host

// Helpers only the tests use, kept out of the host's build.

import (
	"context"

	"github.com/wqhost/wqhost/host/config"
)

func (h *Host) bindingNamed(tenant, name string) *binding {
	for _, b := range h.bindings() {
		if b.tenant.name == tenant && b.name == name {
			return b
		}
	}
	return nil
}

// ListDeadLetters returns up to limit (0 = all) dead letters of tenant's queue (its
// <queue>-poison), repeats of one original message as one entry (DeadLetter.Repeats),
// bodies above ListBodyBytes left out. It holds what it returns: use WalkDeadLetters to
// stream a large queue.
func ListDeadLetters(ctx context.Context, cfg *config.Config, tenant, queue string, limit int) ([]DeadLetter, error) {
	var out []DeadLetter
	byOriginal := map[string]int{} // original id -> index in out
	_, err := WalkDeadLetters(ctx, cfg, tenant, queue, ListOptions{Limit: limit}, func(d DeadLetter) error {
		if d.Repeats < 0 {
			out[byOriginal[d.OriginalID]].Repeats++
			return nil
		}
		if d.OriginalID != "" {
			byOriginal[d.OriginalID] = len(out)
		}
		out = append(out, d)
		return nil
	})
	return out, err
}
