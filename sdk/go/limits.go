package wqhost

import "strconv"

// MaxOutputBytes returns the largest output Emit accepts in the current call, in bytes: the
// tenant's limits.max_output_bytes, or less where the binding's queue backend carries less
// (Azure under base64: 49152). An Emit above it fails with ErrTooLarge. It is the host's
// max_output_bytes metadata key, known in every handler call (single or batch), not in a
// self test; it returns 0 where the host does not tell (a self test, a native build, or a
// host older than the key), so a caller falls back to its own default.
func MaxOutputBytes() int {
	var small [smallValue]byte
	v, ok := lookup(hostMeta, "max_output_bytes", small[:], hostMeta("max_output_bytes", small[:]))
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0
	}
	return n
}
