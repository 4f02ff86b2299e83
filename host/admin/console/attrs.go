package console

import (
	"fmt"
	"slices"
	"strings"
)

// attrs returns the attributes whose key starts with "wqhost." (metering true) or the
// others, as sorted key/value pairs with the values in words.
func attrs(m map[string]any, metering bool) [][2]string {
	var out [][2]string
	for k, v := range m {
		if strings.HasPrefix(k, "wqhost.") != metering {
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
