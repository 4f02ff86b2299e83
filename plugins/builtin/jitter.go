package builtin

import (
	"hash/fnv"
	"strconv"
	"time"

	"github.com/wqhost/wqhost/internal/defaults"
)

// DefaultJitter is the spread of RetryThenDeadLetter's retry delays: ±10 %, as River's. A
// batch that failed together (a downstream outage, a bad deploy) would otherwise come back
// together, in lockstep, at every retry.
const DefaultJitter = defaults.PoisonJitter // 0.1

// jitter spreads d by up to ±frac, keeping it within (0, limit]: a delay the spread would
// take past limit is reflected below it, so delays at the cap spread too instead of piling
// up on it. The fraction is drawn from the message id and its dequeue count rather than a
// random source: the messages of a batch get different delays, while one message's
// delays are reproducible (and the same policy built twice decides the same, as the host's
// and a library user's are compared).
func jitter(d time.Duration, frac float64, limit time.Duration, id string, count int) time.Duration {
	if frac <= 0 || d <= 0 {
		return d
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write(strconv.AppendInt(nil, int64(count), 10))
	u := float64(h.Sum64()>>11) / (1 << 53) // uniform in [0, 1)
	j := time.Duration(float64(d) * (1 + frac*(2*u-1)))
	if j > limit {
		j = max(limit-(j-limit), 1)
	}
	return max(j, 1)
}
