//go:build wqhost_faulthooks

package runtime

import (
	"context"
	"time"

	"github.com/tetratelabs/wazero/api"
)

// faultHostFuncs are host functions only a build with the wqhost_faulthooks tag has, for the
// fault suite (faulttest/) to reach what no real host function does: wqhost.fault_block(ms)
// blocks the calling guest for ms milliseconds, ignoring its time limit, its caller's
// context and the host's shutdown, the way a host call with a bug would. The host must
// stay robust even then (bounded.go, host shutdown); a real build refuses a module that
// imports it, as any unknown import.
func faultHostFuncs() []hostFn {
	return []hostFn{{"fault_block", []api.ValueType{tI32}, nil, func(_ context.Context, _ api.Module, s []uint64) {
		time.Sleep(time.Duration(api.DecodeI32(s[0])) * time.Millisecond)
	}}}
}
