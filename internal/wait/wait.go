// Package wait holds the one helper for a wait with an optional time limit, shared by the
// listener and its backends.
package wait

import "time"

// Timeout returns a channel that delivers once d has passed, or, when d <= 0 (no limit), nil,
// which never delivers in a select. An unreferenced timer is collected without Stop (Go 1.23),
// so callers need not stop it.
func Timeout(d time.Duration) <-chan time.Time {
	if d <= 0 {
		return nil
	}
	return time.After(d)
}
