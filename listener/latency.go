package listener

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// latencyHist is a fixed-bucket, lock-free histogram of handler latencies. Buckets are
// powers of two split in subBuckets linear steps, so a quantile is exact to within
// 1/subBuckets of its value (12.5%) and recording is one atomic add with no allocation.
type latencyHist struct {
	counts [64 * subBuckets]atomic.Uint64
}

const (
	subBits    = 3
	subBuckets = 1 << subBits
)

func latencyBucket(d time.Duration) int {
	n := uint64(max(d, 0))
	if n < subBuckets {
		return int(n)
	}
	exp := bits.Len64(n) - 1 // >= subBits
	sub := (n >> (exp - subBits)) & (subBuckets - 1)
	return (exp-subBits+1)*subBuckets + int(sub)
}

// bucketUpper returns the largest duration that falls in bucket i.
func bucketUpper(i int) time.Duration {
	if i < subBuckets {
		return time.Duration(i)
	}
	exp := i/subBuckets + subBits - 1
	sub := uint64(i % subBuckets)
	lo := uint64(1)<<exp | sub<<(exp-subBits)
	return time.Duration(lo + (uint64(1) << (exp - subBits)) - 1)
}

func (h *latencyHist) record(d time.Duration) { h.counts[latencyBucket(d)].Add(1) }

// quantiles returns the upper bounds of the buckets holding the given quantiles (0..1),
// in order; zero when nothing was recorded.
func (h *latencyHist) quantiles(qs ...float64) []time.Duration {
	var snap [len(h.counts)]uint64
	var total uint64
	for i := range h.counts {
		snap[i] = h.counts[i].Load()
		total += snap[i]
	}
	out := make([]time.Duration, len(qs))
	if total == 0 {
		return out
	}
	for j, q := range qs {
		rank := uint64(q*float64(total) + 0.5)
		rank = min(max(rank, 1), total)
		var seen uint64
		for i, c := range snap {
			seen += c
			if seen >= rank {
				out[j] = bucketUpper(i)
				break
			}
		}
	}
	return out
}
