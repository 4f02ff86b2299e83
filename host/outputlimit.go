package host

// messageLimiter is a queue that knows the largest body its backend carries after its own
// encoding (listener/azure: 49152 bytes under base64; listener/local: the store's 64 MiB;
// listener/memory: no limit of its own).
type messageLimiter interface {
	MaxMessageBytes() int
}

// outputLimit is the effective limit on one output of the binding: the tenant's
// max_output_bytes, or less where the backend's queues carry less. Guests read it as the
// max_output_bytes metadata key (docs/abi.md), and emit refuses a larger output with
// ERR_TOO_LARGE instead of the send failing after the call, which retried and then
// dead-lettered every message of the call.
//
// Every output queue of a binding is on its backend, and all queues of a backend share its
// limit, so it is read from the binding's poison queue: opened from the backend directly
// (never wrapped by sharded or ordered), it is there before any module is loaded, unlike an
// output queue, which is opened on the first send.
func (b *binding) outputLimit() int {
	limit := int(b.tenant.conf().Limits.MaxOutputBytes)
	if ml, ok := b.dead.(messageLimiter); ok {
		if n := ml.MaxMessageBytes(); n > 0 {
			limit = min(limit, n)
		}
	}
	return limit
}

// outputTotalLimit is the cap on all outputs of one message together: the tenant's
// max_output_total_bytes, whose default (0) is 4 × the tenant's max_output_bytes, not 4 ×
// the effective per-output limit, so a backend's smaller messages do not shrink it.
func (b *binding) outputTotalLimit() int {
	l := b.tenant.conf().Limits
	if l.MaxOutputTotalBytes == 0 {
		return 4 * int(l.MaxOutputBytes)
	}
	return int(l.MaxOutputTotalBytes)
}
