package listener

import (
	"testing"
	"time"
)

// Every duration lands in a bucket whose upper bound is at least the duration and at most
// 12.5% above it, and buckets grow with the duration.
func TestLatencyBuckets(t *testing.T) {
	prev := -1
	for _, d := range []time.Duration{0, 1, 7, 8, 9, 15, 16, 17, 100, 999, time.Microsecond,
		time.Millisecond, 1234567, 10 * time.Millisecond, time.Second, time.Minute, time.Hour, 1 << 62} {
		i := latencyBucket(d)
		up := bucketUpper(i)
		if up < d || float64(up) > float64(d)*1.125+1 {
			t.Errorf("%d: bucket %d upper bound %d, want within [d, d*1.125]", d, i, up)
		}
		if i < prev {
			t.Errorf("%d: bucket %d below the previous duration's %d", d, i, prev)
		}
		prev = i
	}
	if i := latencyBucket(-time.Second); i != 0 {
		t.Errorf("negative duration in bucket %d, want 0", i)
	}
	var h latencyHist
	if q := h.quantiles(0.5); q[0] != 0 {
		t.Errorf("empty histogram p50 %s, want 0", q[0])
	}
}
