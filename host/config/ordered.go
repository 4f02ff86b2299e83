package config

// validateOrdered rejects ordered mode where the binding cannot honour it: group N+1 may
// start only once group N has settled, which needs an ordered receive from the store (local;
// nats, which maps the groups onto subjects).
func (c *Config) validateOrdered(fail failFunc, bp string, b Binding) {
	if be, ok := c.BackendFor(b.Backend); ok && be.Type != BackendLocal && be.Type != BackendNATS {
		why := "it has no ordered receive"
		if be.Type == BackendAzure {
			why = "Azure Queue Storage does not deliver in FIFO order"
		}
		fail(bp+".ordered", "backend %q is of type %s: %s; ordered mode needs a local or nats backend", b.Backend, be.Type, why)
	}
	if len(b.Shards) > 0 {
		fail(bp+".ordered", "a sharded queue has no FIFO order across its shards; ordered mode needs a single queue")
	}
	if b.AtMostOnce {
		fail(bp+".ordered", "at_most_once settles messages on receive, so group N+1 could start before group N finished")
	}
}
