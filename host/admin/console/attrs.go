package console

import (
	"fmt"
	"slices"
	"strings"
)

// shownAttrs are the listener's dead-letter attributes the detail page shows in rows of
// their own.
var shownAttrs = map[string]bool{
	"wqhost.reason": true, "wqhost.dequeue_count": true, "wqhost.dead_lettered_at": true,
	"wqhost.handler_version": true, "wqhost.original_queue": true, "wqhost.original_id": true,
	attemptsAttr: true,
}

// attemptsAttr is the attribute holding the message's attempts (queue.AttrAttempts), shown
// as a table of its own.
const attemptsAttr = "wqhost.attempts"

// attrs returns the attributes whose key starts with "wqhost." (metering true; those in
// shownAttrs left out) or the others, as sorted key/value pairs with the values in words.
// Any wqhost.* attribute added later shows up with no change here.
func attrs(m map[string]any, metering bool) [][2]string {
	var out [][2]string
	for k, v := range m {
		if strings.HasPrefix(k, "wqhost.") != metering || shownAttrs[k] {
			continue
		}
		s, ok := v.(string)
		if !ok {
			s = fmt.Sprint(v)
		}
		out = append(out, [2]string{k, s})
	}
	slices.SortFunc(out, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	return out
}
