package memory

import "math"

// MaxMessageBytes returns the largest body Send accepts on this queue. The memory backend
// keeps bodies as they are and enforces no limit of its own (only the host's
// max_message_bytes and max_output_bytes apply), so this is the largest body a guest can
// address: math.MaxInt32.
func (q *Queue) MaxMessageBytes() int { return math.MaxInt32 }
