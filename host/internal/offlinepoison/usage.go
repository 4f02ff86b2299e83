package offlinepoison

import (
	"strconv"

	"github.com/wqhost/wqhost/listener/queue"
)

// Usage is a dead letter's metering: what its failing attempt cost, from the attributes the
// host wrote (queue.AttrFuel …; docs/metering.md has the units). A batch call's figures are
// its share: the call's divided by BatchSize.
type Usage struct {
	Fuel         uint64 `json:"fuel"`
	WallUs       int64  `json:"wall_us"`
	HostUs       int64  `json:"host_us"`
	MemoryBytes  uint64 `json:"memory_bytes"`
	HTTPRequests uint64 `json:"http_requests"`
	HTTPBytes    uint64 `json:"http_bytes"`
	BatchSize    int    `json:"batch_size,omitempty"`
}

// usageAttr are the attribute keys Usage is read from, left out of DeadLetter.Attributes.
var usageAttr = map[string]bool{
	queue.AttrFuel: true, queue.AttrWallUs: true, queue.AttrHostUs: true, queue.AttrMemoryBytes: true,
	queue.AttrHTTPRequests: true, queue.AttrHTTPBytes: true, queue.AttrBatchSize: true,
}

// usageOf reads a dead letter's metering attributes; nil when it has none. A value that
// does not parse reads as 0: the figures are informative, the dead letter is listed anyway.
func usageOf(a map[string]string) *Usage {
	if _, ok := a[queue.AttrFuel]; !ok {
		return nil
	}
	u64 := func(k string) uint64 { v, _ := strconv.ParseUint(a[k], 10, 64); return v }
	i64 := func(k string) int64 { v, _ := strconv.ParseInt(a[k], 10, 64); return v }
	n, _ := strconv.Atoi(a[queue.AttrBatchSize])
	return &Usage{
		Fuel: u64(queue.AttrFuel), WallUs: i64(queue.AttrWallUs), HostUs: i64(queue.AttrHostUs),
		MemoryBytes: u64(queue.AttrMemoryBytes), HTTPRequests: u64(queue.AttrHTTPRequests),
		HTTPBytes: u64(queue.AttrHTTPBytes), BatchSize: n,
	}
}
