package runtime

// PageBytes is the size of one page of WebAssembly linear memory.
const PageBytes = 65536

// Defaults of the zero fields of PoolConfig and TenantLimits: the one definition of each,
// which the host's config (host/config) refers to, so that a library user and a host user
// get the same pool.
const (
	// DefaultMaxInstances is PoolConfig.MaxInstances' default: calls at once per pool.
	DefaultMaxInstances = 4
	// DefaultMaxOutputBytes is PoolConfig.MaxOutputBytes' default: the largest output message.
	DefaultMaxOutputBytes = 1 << 20
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
	DefaultMemoryBytes = 128 << 20
	// DefaultMemoryPages is TenantLimits.MemoryPages' default.
	DefaultMemoryPages uint32 = DefaultMemoryBytes / PageBytes
)
