// Package defaults holds the default values, bounds and built-in policy names that host/config
// documents and the library packages apply (listener, plugins/builtin, plugins/external,
// runtime, host/admin, internal/safefile, listener/pollbudget): one definition of each.
//
// It imports nothing but the standard library's time, so that host/config can refer to these
// values without linking the packages that apply them (wazero, gRPC, go-plugin). Each library
// package re-exports the values it applies under its own name (listener.DefaultMaxWorkers is
// MaxWorkers here), which is what an embedder reads; host/config re-exports them as its
// documented defaults. A value that only one package uses stays in that package.
package defaults

import "time"

// Listener (listener.Config) defaults.
const (
	MinWorkers        = 1
	MaxWorkers        = 16
	VisibilityTimeout = 30 * time.Second
	MaxDequeueCount   = 5
	// MinIdle and MaxIdle bound the default back-off between empty receives.
	MinIdle          = 100 * time.Millisecond
	MaxIdle          = 60 * time.Second
	ShutdownGrace    = 30 * time.Second
	PushFallbackPoll = 5 * time.Minute
	// MaxBatchMessages is the most messages one batch call may ask for (AWS Lambda's SQS
	// trigger allows as many).
	MaxBatchMessages = 10000
)

// MaxIdleCallsPerHour bounds a poll budget's idle receives (listener/pollbudget): 10,000 a
// second, half of an Azure storage account's documented 20,000 requests a second.
const MaxIdleCallsPerHour = 36_000_000

// Names of the built-in policies (plugins/builtin), as written in config.
const (
	BackoffRandomExponential  = "random-exponential"
	ScalerDepthTable          = "depth-table"
	ScalerTarget              = "target"
	PoisonRetryThenDeadLetter = "retry-then-dead-letter"
)

// Built-in policy names used when config names none.
const (
	BackoffName = BackoffRandomExponential
	ScalerName  = ScalerTarget
	PoisonName  = PoisonRetryThenDeadLetter
)

// BackoffNames returns the built-in back-off policies' names.
func BackoffNames() []string { return []string{BackoffRandomExponential} }

// ScalerNames returns the built-in scalers' names.
func ScalerNames() []string { return []string{ScalerDepthTable, ScalerTarget} }

// PoisonNames returns the built-in poison policies' names.
func PoisonNames() []string { return []string{PoisonRetryThenDeadLetter} }

// Built-in poison policy (plugins/builtin RetryThenDeadLetter) defaults; the reasoning is in
// plugins/builtin's doc of them.
const (
	PoisonBaseDelay = time.Second
	PoisonMaxDelay  = 60 * time.Second
	// PoisonJitter is the ± spread of the retry delays (10 %).
	PoisonJitter = 0.1
)

// PluginCallTimeout is an external policy plugin's default time per call (plugins/external).
const PluginCallTimeout = 50 * time.Millisecond

// Runtime (runtime.PoolConfig, runtime.TenantLimits) defaults.
const (
	// MaxInstances is the calls at once per pool.
	MaxInstances = 4
	// MaxOutputBytes is the largest output message.
	MaxOutputBytes = 1 << 20
	// MemoryBytes is the linear memory an instance may grow to.
	MemoryBytes = 128 << 20
	// TenantHTTPRequests caps a tenant's concurrently open outbound HTTP requests.
	TenantHTTPRequests = 64
)

// AdminMaxBodyBytes is the admin API's request body cap (64 KiB): admin requests are small
// JSON documents.
const AdminMaxBodyBytes = 64 << 10

// MaxModuleBytes is the size cap of a file read whole (a module) when none is configured:
// far above any real module.
const MaxModuleBytes = 256 << 20
