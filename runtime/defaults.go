package runtime

import "github.com/wqhost/wqhost/internal/defaults"

// PageBytes is the size of one page of WebAssembly linear memory.
const PageBytes = 65536

// Defaults of the zero fields of PoolConfig and TenantLimits. Those the host's config
// (host/config) also documents are defined once in internal/defaults, so that a library user
// and a host user get the same pool.
const (
	// DefaultMaxInstances is PoolConfig.MaxInstances' default: calls at once per pool.
	DefaultMaxInstances = defaults.MaxInstances // 4
	// DefaultMaxOutputBytes is PoolConfig.MaxOutputBytes' default: the largest output message.
	DefaultMaxOutputBytes = defaults.MaxOutputBytes // 1 MiB
	// DefaultMaxOutputs is PoolConfig.MaxOutputs' default: outputs per message.
	DefaultMaxOutputs = 64
	// DefaultMaxCallOutputBytes is PoolConfig.MaxCallOutputBytes' default: the bytes of all
	// outputs of one call together (a batch's messages' and the call's own).
	DefaultMaxCallOutputBytes = 64 << 20
	// DefaultStdioCapBytes is PoolConfig.StdioCapBytes' default: guest stdout and stderr
	// logged per call.
	DefaultStdioCapBytes = 16 << 10
	// DefaultMemoryBytes is the linear memory an instance may grow to when TenantLimits
	// sets none (DefaultMemoryPages pages).
	DefaultMemoryBytes = defaults.MemoryBytes // 128 MiB
	// DefaultMemoryPages is TenantLimits.MemoryPages' default.
	DefaultMemoryPages uint32 = DefaultMemoryBytes / PageBytes
)
