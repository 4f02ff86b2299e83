// Package config loads and validates a wqhost host configuration: a YAML file, WQHOST_…
// environment overrides and command-line flags, merged with koanf, decoded strictly (an
// unknown key or a wrong type is an error naming its key path) and validated as a whole, so
// that a host never starts half-configured.
//
// The package does no file I/O: it parses and validates. The caller passes the
// config file's bytes, and modules and plugins are found and checked by host/source, whose
// LoadConfig reads the file and adds that check to the same report (see Check).
//
// # Sources and precedence
//
// Lowest to highest: the built-in defaults of every key, the YAML file (or, with no file, the
// embedded default config, default.yaml), environment variables, flags.
//
// Environment variables start with WQHOST_; the rest of the name is lower-cased and "__"
// separates nesting levels, so a single "_" stays part of a key:
//
//	WQHOST_DATA_DIR=/var/lib/wqhost                         -> data_dir
//	WQHOST_ADMIN__ADDR=127.0.0.1:9000                       -> admin.addr
//	WQHOST_TENANTS__ACME__BINDINGS__ORDERS__BATCH_SIZE=16   -> tenants.acme.bindings.orders.batch_size
//
// A WQHOST_ variable whose first part is no top-level key (e.g. WQHOST_ADMIN_TOKEN, a secret
// that admin.token_env names) is not an override and is left alone.
//
// Flags (a pflag.FlagSet passed to Load) override only when set on the command line: see
// FlagKeys for the names understood.
//
// # Modules
//
// A binding's module is either a file path (relative paths are relative to the config file's
// directory, or to the working directory for the embedded default) or "builtin:<name>", one of
// the example handlers compiled into the binary (examples/handlers, e.g. "builtin:billing-go").
// This package only checks that a file lies inside the tenant's module_dir (ModulePath,
// InModuleDir: lexical); host/source reads modules and checks the files.
//
// # Queue namespaces
//
// Queue names in the config are a tenant's own names. On the backend, a queue of tenant T is
// stored as "T.<queue>" (Azure, whose names cannot hold a dot: "T-<queue>"), except for the
// tenant named "default", whose queues keep their names. See Config.PhysicalQueue.
package config

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/wqhost/wqhost/internal/defaults"
	"github.com/wqhost/wqhost/listener/queue"
)

// DefaultTenant is the tenant whose queues are not prefixed.
const DefaultTenant = "default"

// Documented defaults. Where a library package (listener, plugins/builtin, plugins/external,
// runtime, host/admin) has the same setting, both refer to one definition in
// internal/defaults, a package that imports nothing, so that this package links none of the
// library packages: a config that sets nothing behaves as a library user who sets nothing
// (TestEffectiveDefaultsAreTheLibraryDefaults). The rest are the host's own choices.
const (
	DefaultDataDir           = "./data"
	DefaultAdminAddr         = "127.0.0.1:8480"
	DefaultAdminMaxBodyBytes = ByteSize(defaults.AdminMaxBodyBytes)
	DefaultBackend           = "local"
	DefaultLocalPath         = "wqhost.db"
	DefaultBatchSize         = queue.MaxBatch
	DefaultVisibilityTimeout = defaults.VisibilityTimeout
	DefaultMaxDequeueCount   = defaults.MaxDequeueCount
	DefaultMinWorkers        = defaults.MinWorkers
	DefaultMaxWorkers        = defaults.MaxWorkers
	DefaultBackoffMin        = defaults.MinIdle
	DefaultBackoffMax        = defaults.MaxIdle
	DefaultPoisonBaseDelay   = defaults.PoisonBaseDelay
	DefaultPoisonMaxDelay    = defaults.PoisonMaxDelay
	DefaultPoisonJitter      = defaults.PoisonJitter
	DefaultPluginTimeout     = defaults.PluginCallTimeout
	DefaultMemory            = ByteSize(defaults.MemoryBytes)
	DefaultPushFallbackPoll  = defaults.PushFallbackPoll
	DefaultMaxOutputBytes    = ByteSize(defaults.MaxOutputBytes)
	DefaultPoolMaxInstances  = defaults.MaxInstances

	// DefaultTimeout is the host's time limit per message; a runtime pool has none unless
	// given one (PoolConfig.Timeout 0), which a host must never run.
	DefaultTimeout = 30 * time.Second
	// DefaultInstances caps each binding's pool size in a tenant (limits.instances), a host
	// notion.
	DefaultInstances = 64
	// DefaultMaxMessageBytes is the largest message body a binding hands to its handler; a
	// listener has no limit unless given one (listener.Config.MaxMessageBytes 0).
	DefaultMaxMessageBytes = ByteSize(1 << 20)
	// DefaultPoolMinInstances keeps no instance warm: with pool.idle_timeout an idle binding
	// scales to zero and holds no guest memory, as Lambda and Functions bill idle consumers
	// nothing; its next message instantiates one (TinyGo and Rust guests in well under a
	// millisecond, standard Go in a few). Latency-critical bindings set min_instances.
	DefaultPoolMinInstances = 0
	// DefaultPoolIdleTimeout is how long a binding's instance may sit unused before it is
	// closed (pool.idle_timeout); a runtime pool keeps its instances unless given one
	// (PoolConfig.IdleTimeout 0).
	DefaultPoolIdleTimeout = time.Minute
	// DefaultBatchMaxBytes is batch.max_bytes' default: with max_messages up to 10000 and
	// bodies up to max_message_bytes, a batch needs a byte bound of its own (a pool's calls
	// hold max_instances of them), and a guest reads the whole batch into its memory.
	DefaultBatchMaxBytes = ByteSize(16 << 20)
	DefaultWeight        = 1
	// DefaultMaxBindings is max_bindings' default: twice the 10,000 bindings the density
	// harness measures on one host (BenchmarkDensity: about 10 s to start, 321 MiB, 3
	// goroutines per binding, docs/benchmarks.md), so a config beyond what has been measured
	// fails at load with the two numbers instead of a host that starts for minutes.
	DefaultMaxBindings = 20000
)

// Policy names of the built-in policies (plugins/builtin).
const (
	BackoffRandomExponential  = defaults.BackoffRandomExponential
	ScalerDepthTable          = defaults.ScalerDepthTable
	ScalerTarget              = defaults.ScalerTarget
	PoisonRetryThenDeadLetter = defaults.PoisonRetryThenDeadLetter
)

// ABI names (runtime.ABI values).
const (
	ABIWqhostV1  = "wqhost/v1"
	ABIWasiStdio = "wasi-stdio"
	// ABIExtism runs an Extism plugin (docs/abi.md, "Extism plugins"); a module importing
	// extism:host/env is detected as one without it.
	ABIExtism = "extism"
)

// Backend types.
const (
	BackendLocal  = "local"
	BackendAzure  = "azure"
	BackendMemory = "memory"
)

// PoisonSuffix names a queue's dead-letter queue.
const PoisonSuffix = queue.PoisonSuffix

// BuiltinPrefix marks a module reference to an embedded example handler.
const BuiltinPrefix = "builtin:"

// Config is a whole host configuration. Load and Parse return it validated.
type Config struct {
	// DataDir holds the local queue store and the compilation cache.
	DataDir string `koanf:"data_dir"`
	// CacheDir holds compiled module machine code across restarts; default <data_dir>/cache.
	// Hosts may share one.
	CacheDirPath string `koanf:"cache_dir"`
	// MaxConcurrency is the host-wide budget of handler calls at once shared by tenants;
	// 0 means no host-wide cap (each tenant's max_concurrency still applies).
	MaxConcurrency int `koanf:"max_concurrency"`
	// MaxModuleBytes caps the size of a module or plugin file (default 256 MiB); such paths
	// must be regular files (not a FIFO, device or directory: internal/safefile).
	MaxModuleBytes ByteSize `koanf:"max_module_bytes"`
	// MaxBindings caps the bindings of all tenants together (default DefaultMaxBindings): a
	// config beyond it is refused at load, naming both numbers, rather than starting a host
	// larger than any measured.
	MaxBindings int `koanf:"max_bindings"`
	// MemoryBudget is what the host's large consumers may reserve together (docs/limits.md);
	// 0: memlimit.Budget of the cgroup's memory limit, or of the machine's memory.
	MemoryBudget ByteSize `koanf:"memory_budget"`
	// Metrics shapes the Prometheus series of /metrics.
	Metrics  Metrics            `koanf:"metrics"`
	Shutdown Shutdown           `koanf:"shutdown"` // shutdown.go
	Admin    Admin              `koanf:"admin"`
	Log      Log                `koanf:"log"`
	Backends map[string]Backend `koanf:"backends"`
	Tenants  map[string]Tenant  `koanf:"tenants"`

	// BaseDir is the directory relative module and plugin paths are resolved against: the
	// config file's directory, or the working directory for the embedded default.
	BaseDir string `koanf:"-"`
	// File is the config file loaded, or "" for the embedded default.
	File string `koanf:"-"`
}

// Metrics configures the Prometheus series the admin API serves.
type Metrics struct {
	// PerBinding labels every binding's series with tenant, binding and queue (default
	// true): 48 series per binding, 480,000 at 10,000 bindings. False serves the same
	// metric names summed per tenant (the binding and queue labels dropped), except those
	// that only make sense per binding (see host/metrics.go).
	PerBinding bool `koanf:"per_binding"`
}

// Admin configures the admin HTTP API.
type Admin struct {
	// Addr is the listen address; loopback by default. "off" disables the admin server.
	Addr string `koanf:"addr"`
	// TokenEnv names the environment variable holding the host-wide bearer token; empty
	// means no authentication (acceptable on loopback only).
	TokenEnv string `koanf:"token_env"`
	// MaxBodyBytes limits request bodies (default admin.DefaultMaxBodyBytes, 64 KiB).
	MaxBodyBytes ByteSize `koanf:"max_body_bytes"`
	// AllowUnauthenticated accepts an Addr beyond loopback without TokenEnv. Without it such
	// a config is refused at load: reload, notify and status would be open to the network.
	AllowUnauthenticated bool `koanf:"allow_unauthenticated"`
}

// AdminLoopback reports whether the admin address host is a loopback one ("localhost" or a
// loopback IP). An empty host (":8080") listens on every interface.
func AdminLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Log configures the host's slog output.
type Log struct {
	Format string `koanf:"format"` // text (default) or json
	Level  string `koanf:"level"`  // debug, info (default), warn, error
}

// Backend is one queue store or account. Fields apply to the type named in the comment.
type Backend struct {
	Type string `koanf:"type"` // local, azure, nats or memory

	// local: Path is the SQLite file, relative to data_dir (default wqhost.db).
	Path string `koanf:"path"`
	// local: Sync is full (default, survives power loss) or normal (survives process crashes).
	Sync string `koanf:"sync"`

	// azure: exactly one way to authenticate.
	ConnectionStringEnv string `koanf:"connection_string_env"`
	AccountName         string `koanf:"account_name"`
	AccountKeyEnv       string `koanf:"account_key_env"`
	SASURLEnv           string `koanf:"sas_url_env"`
	ServiceURL          string `koanf:"service_url"`
	DefaultCredential   bool   `koanf:"default_credential"`
	// azure: Encoding of message bodies on the wire: base64 (default, as Functions) or text.
	Encoding string `koanf:"encoding"`
	// azure, nats: CreateQueues creates missing queues (nats: streams) on open.
	CreateQueues bool `koanf:"create_queues"`
	// azure: PoisonTTL is the time to live of dead letters (0 = never expire).
	PoisonTTL time.Duration `koanf:"poison_ttl"`
	// azure: PoisonFormat is how dead letters are stored: envelope (default: wqhost's JSON
	// with the reason, dequeue count and original id) or raw (the original body alone, as
	// Azure Functions stores it; the reason goes to the log only).
	PoisonFormat string `koanf:"poison_format"`
	// azure: IdleCallsPerHour, when above 0, is the rate of idle receives shared by all the
	// backend's bindings without push (listener/pollbudget): least recently polled queues
	// and recently active ones first, each idle queue at least every
	// 0.1s + 2·n·3600s/IdleCallsPerHour with n such bindings (logged at start). 0 (default):
	// each binding polls on its own back-off, up to backoff.max apart (60 calls an hour at
	// the 60s default).
	IdleCallsPerHour int `koanf:"idle_calls_per_hour"`
	// nats: servers, authentication, streams (see NATS).
	NATS NATS `koanf:"nats"`
}

// Tenant is the unit of isolation: its own bindings, queue namespace, limits and token.
type Tenant struct {
	// Weight is the tenant's share of the host-wide budget (max_concurrency) relative to the
	// other tenants that have work: a free slot goes to the waiting tenant with the fewest
	// calls in flight per weight, within its own max_concurrency. Idle tenants take nothing.
	Weight int `koanf:"weight"`
	// MaxConcurrency caps the tenant's handler calls at once; 0 means no cap.
	MaxConcurrency int `koanf:"max_concurrency"`
	// TokenEnv names the environment variable holding the tenant's admin bearer token.
	TokenEnv string             `koanf:"token_env"`
	Limits   Limits             `koanf:"limits"`
	Bindings map[string]Binding `koanf:"bindings"`
	// ModuleDir, when set, confines the tenant's module paths: each must resolve inside it.
	ModuleDir string `koanf:"module_dir"`
}

// Limits apply to every handler call of a tenant.
type Limits struct {
	Memory          ByteSize      `koanf:"memory"`            // linear memory per instance
	Timeout         time.Duration `koanf:"timeout"`           // wall time per message
	Instances       int           `koanf:"instances"`         // cap of each binding's pool size
	MaxMessageBytes ByteSize      `koanf:"max_message_bytes"` // larger messages are rejected
	MaxOutputBytes  ByteSize      `koanf:"max_output_bytes"`  // per output message
	// HTTPConcurrency caps the tenant's outbound HTTP requests open at once (0: 64).
	HTTPConcurrency int `koanf:"http_concurrency"`
	// MaxOutputTotalBytes caps all outputs of one message together; 0 = 4 × MaxOutputBytes.
	MaxOutputTotalBytes ByteSize `koanf:"max_output_total_bytes"`
	// MaxCallOutputBytes caps all outputs of one handler call together (a batch call's
	// messages and its own outputs); 0 = the runtime's default, 64 MiB.
	MaxCallOutputBytes ByteSize `koanf:"max_call_output_bytes"`
	// Compile caps the shape of the tenant's modules, checked before they are compiled.
	Compile CompileLimits `koanf:"compile"`
	// FuelQuota caps the fuel the tenant's handler calls spend per period; off by default.
	FuelQuota FuelQuota `koanf:"fuel_quota"`
	// MemoryBudget is what the tenant's instance memories, kernel memory and compiled
	// modules may reserve together; 0: its weight's share of the host's memory_budget.
	MemoryBudget ByteSize `koanf:"memory_budget"`
}

// FuelQuota is a tenant's fuel per period (docs/metering.md): once its calls have spent Fuel
// units in the current Period, its bindings lease no new message until the period rolls
// over (messages wait in their queue; none is failed or dead-lettered). Periods are aligned
// to UTC (1h rolls over on the hour). Fuel 0 means no quota.
type FuelQuota struct {
	Fuel   int64         `koanf:"fuel"`
	Period time.Duration `koanf:"period"`
}

// Quota bounds: a period from a minute to 31 days.
const (
	MinFuelQuotaPeriod = time.Minute
	MaxFuelQuotaPeriod = 31 * 24 * time.Hour
)

// CompileLimits are a tenant's caps on a module's shape (runtime.CompileLimits): what makes
// compiling cost more than its size. 0 takes the runtime's default for each.
type CompileLimits struct {
	MaxFunctions     int      `koanf:"max_functions"`      // functions defined and imported
	MaxFunctionBytes ByteSize `koanf:"max_function_bytes"` // one function body
	MaxNestingDepth  int      `koanf:"max_nesting_depth"`  // block, loop and if in one another
	MaxLoopDepth     int      `koanf:"max_loop_depth"`     // loops in one another
	MaxBranches      int      `koanf:"max_branches"`       // if, br, br_if, br_table targets per function
	MaxLocals        int      `koanf:"max_locals"`         // locals per function
	// Timeout and Memory bound the compile of a new module version, run in a child
	// process (0: 2m and 1GiB): past either the module is refused.
	Timeout time.Duration `koanf:"timeout"`
	Memory  ByteSize      `koanf:"memory"`
}

// Binding connects a queue to a handler module and an optional output queue.
type Binding struct {
	Backend string `koanf:"backend"` // a key of backends; default "local"
	// Queue is the input queue. With Shards it is the logical name (status, <queue>-poison)
	// of the shard queues consumed as one.
	Queue  string   `koanf:"queue"`
	Shards []string `koanf:"shards"`
	// Output is the queue the handler's default emits go to; empty means none.
	Output string            `koanf:"output"`
	Module string            `koanf:"module"` // a file path or builtin:<name>
	ABI    string            `koanf:"abi"`    // wqhost/v1 (default), wasi-stdio or extism
	Config map[string]string `koanf:"config"` // read by the guest with config_get
	// Function is the export an Extism plugin's calls run (abi extism); default "handle".
	Function string `koanf:"function"`

	BatchSize         int           `koanf:"batch_size"`
	VisibilityTimeout time.Duration `koanf:"visibility_timeout"`
	MaxDequeueCount   int           `koanf:"max_dequeue_count"`
	MinWorkers        int           `koanf:"min_workers"`
	MaxWorkers        int           `koanf:"max_workers"`
	// Push lets the last worker stop when idle: wake-ups (admin notify, local enqueue) start it.
	Push bool `koanf:"push"`
	// PushFallbackPoll is, with push, the longest an idle binding goes without a receive, so
	// a producer that never notifies cannot strand a message: default 5m (12 receives an
	// hour per binding); 0 turns the safety net off.
	PushFallbackPoll time.Duration `koanf:"push_fallback_poll"`
	// AtMostOnce deletes messages on receive instead of after success.
	AtMostOnce bool `koanf:"at_most_once"`
	// Ordered runs the binding in ordered execution groups: messages carry an integer order
	// key (attribute wqhost.order); messages of one group run concurrently, and group N+1
	// starts only after every message of group N has settled (success or dead letter).
	// Only local and nats backends (an ordered receive; nats: one subject per group) can
	// honour it.
	Ordered bool `koanf:"ordered"`

	Backoff Backoff `koanf:"backoff"`
	Scaler  Scaler  `koanf:"scaler"`
	Poison  Poison  `koanf:"poison"`
	Pool    Pool    `koanf:"pool"`
	// HTTP is the outbound HTTP policy; without allow rules every request is denied.
	HTTP HTTP `koanf:"http"`
	// Batch hands the module many messages per call (its wqhost_handle_batch export);
	// off unless max_messages is above 1.
	Batch Batch `koanf:"batch"`
	// Breaker tunes the binding's circuit breaker (breaker.go).
	Breaker Breaker `koanf:"breaker"`
}

// Batch bounds a batch handler's calls (listener.BatchConfig): the listener gathers leased
// messages until any bound is reached.
type Batch struct {
	// MaxMessages is the most messages per call, up to MaxBatchMessages; 0 or 1: one
	// message per call.
	MaxMessages int `koanf:"max_messages"`
	// MaxWait is how long a batch may wait to fill after its first message; 0 hands over
	// what the queue has at once.
	MaxWait time.Duration `koanf:"max_wait"`
	// MaxBytes ends a batch once its bodies hold this many bytes (the message that crosses
	// it stays in; the rest wait for the next call); default DefaultBatchMaxBytes, 0: no
	// limit.
	MaxBytes ByteSize `koanf:"max_bytes"`
}

// PluginRef selects an external policy plugin (plugins/external) instead of a built-in; the
// built-in named by the policy's "policy" key answers while the plugin is down.
type PluginRef struct {
	Plugin  string            `koanf:"plugin"`  // path of the plugin binary
	Args    []string          `koanf:"args"`    // its arguments
	Env     map[string]string `koanf:"env"`     // added to its environment
	Timeout time.Duration     `koanf:"timeout"` // deadline of each call (default 50ms)
}

// Backoff is the idle back-off policy.
type Backoff struct {
	Policy    string        `koanf:"policy"` // random-exponential
	Min       time.Duration `koanf:"min"`
	Max       time.Duration `koanf:"max"`
	PluginRef `koanf:",squash"`
}

// DepthRow is one row of a depth-table scaler: from Depth messages on, run Workers workers.
type DepthRow struct {
	Depth   int64 `koanf:"depth"`
	Workers int   `koanf:"workers"`
}

// Scaler is the scale-out policy.
type Scaler struct {
	Policy    string     `koanf:"policy"` // target (default) or depth-table
	Target    int64      `koanf:"target"` // target: messages per worker (0 = 32)
	Table     []DepthRow `koanf:"table"`  // depth-table: empty = the whitepaper table
	PluginRef `koanf:",squash"`
}

// Poison is the failed-message policy.
type Poison struct {
	Policy    string        `koanf:"policy"` // retry-then-dead-letter
	BaseDelay time.Duration `koanf:"base_delay"`
	MaxDelay  time.Duration `koanf:"max_delay"`
	// Jitter spreads each retry delay by up to ±Jitter of it (0.1 = ±10 %, the default;
	// 0 = none), so messages that failed together do not retry in lockstep.
	Jitter    float64 `koanf:"jitter"`
	PluginRef `koanf:",squash"`
}

// Pool sizes a binding's instance pool.
type Pool struct {
	MinInstances int      `koanf:"min_instances"` // warm instances
	MaxInstances int      `koanf:"max_instances"` // calls at once (at most limits.instances)
	MaxUses      int      `koanf:"max_uses"`      // calls before an instance is replaced; 0 = no limit
	MaxMemory    ByteSize `koanf:"max_memory"`    // replace an instance whose memory grew past it; 0 = never
	// IdleTimeout closes an instance unused that long, down to min_instances; 0 = never.
	IdleTimeout time.Duration `koanf:"idle_timeout"`
}

func defaultConfig() Config {
	return Config{
		DataDir:        DefaultDataDir,
		MaxModuleBytes: defaults.MaxModuleBytes,
		MaxBindings:    DefaultMaxBindings,
		Metrics:        Metrics{PerBinding: true},
		Shutdown:       Shutdown{Grace: DefaultShutdownGrace},
		Admin:          Admin{Addr: DefaultAdminAddr, MaxBodyBytes: DefaultAdminMaxBodyBytes},
		Log:            Log{Format: "text", Level: "info"},
	}
}

func defaultBackend() Backend {
	return Backend{Type: BackendLocal, Path: DefaultLocalPath, Sync: "full", Encoding: "base64"}
}

func defaultTenant() Tenant {
	return Tenant{
		Weight: DefaultWeight,
		Limits: Limits{
			Memory: DefaultMemory, Timeout: DefaultTimeout, Instances: DefaultInstances,
			MaxMessageBytes: DefaultMaxMessageBytes, MaxOutputBytes: DefaultMaxOutputBytes,
		},
	}
}

func defaultBinding() Binding {
	return Binding{
		Backend:           DefaultBackend,
		ABI:               ABIWqhostV1,
		BatchSize:         DefaultBatchSize,
		VisibilityTimeout: DefaultVisibilityTimeout,
		MaxDequeueCount:   DefaultMaxDequeueCount,
		MinWorkers:        DefaultMinWorkers,
		MaxWorkers:        DefaultMaxWorkers,
		PushFallbackPoll:  DefaultPushFallbackPoll,
		Batch:             Batch{MaxBytes: DefaultBatchMaxBytes},
		Backoff:           Backoff{Policy: defaults.BackoffName, Min: DefaultBackoffMin, Max: DefaultBackoffMax},
		Scaler:            Scaler{Policy: defaults.ScalerName},
		Poison:            Poison{Policy: defaults.PoisonName, BaseDelay: DefaultPoisonBaseDelay, MaxDelay: DefaultPoisonMaxDelay, Jitter: DefaultPoisonJitter},
		Pool:              Pool{MinInstances: DefaultPoolMinInstances, MaxInstances: DefaultPoolMaxInstances, IdleTimeout: DefaultPoolIdleTimeout},
		Breaker:           Breaker{Threshold: DefaultBreakerThreshold},
	}
}

// BackendFor returns the backend a binding uses. The implicit "local" backend exists even
// when backends does not declare it.
func (c *Config) BackendFor(name string) (Backend, bool) {
	if b, ok := c.Backends[name]; ok {
		return b, true
	}
	if name == DefaultBackend {
		return defaultBackend(), true
	}
	return Backend{}, false
}

// PhysicalQueue returns the backend name of a tenant's queue: the tenant "default" keeps
// its names; others get "<tenant>.<queue>", or "<len(tenant)>-<tenant>-<queue>" on Azure
// (no dots there). The mapping is injective: see names.go.
func (c *Config) PhysicalQueue(tenant, backend, queue string) string {
	b, _ := c.BackendFor(backend)
	return physicalQueue(b.Type, tenant, queue)
}

// CheckQueue returns why queue cannot be one of tenant's own queues on backend, or nil: a
// malformed or reserved ("-poison") name, or one whose physical name breaks the backend's
// rule (Azure: 3..63 characters). Guests' emits and `wqhost send` are checked with it.
func (c *Config) CheckQueue(tenant, backend, queue string) error {
	if err := CheckQueueName(queue); err != nil {
		return err
	}
	b, _ := c.BackendFor(backend)
	return checkPhysical(b.Type, physicalQueue(b.Type, tenant, queue))
}

// LocalPath returns the SQLite file of a local backend: Path resolved against DataDir.
func (c *Config) LocalPath(b Backend) string {
	if filepath.IsAbs(b.Path) {
		return b.Path
	}
	return filepath.Join(c.DataDir, b.Path)
}

// CacheDir is where the runtime keeps compiled modules across restarts: cache_dir, or
// <data_dir>/cache.
func (c *Config) CacheDir() string {
	if c.CacheDirPath != "" {
		return c.CacheDirPath
	}
	return filepath.Join(c.DataDir, "cache")
}

// Binding returns tenant's binding by name.
func (c *Config) Binding(tenant, binding string) (Binding, error) {
	t, ok := c.Tenants[tenant]
	if !ok {
		return Binding{}, fmt.Errorf("tenant %q is not configured", tenant)
	}
	b, ok := t.Bindings[binding]
	if !ok {
		return Binding{}, fmt.Errorf("tenants.%s: binding %q is not configured", tenant, binding)
	}
	return b, nil
}

// ErrNotConfigured reports a tenant or queue the config does not know.
var ErrNotConfigured = errors.New("not configured")

// QueueBackend returns the backend that holds a tenant's queue: the backend of the binding
// that reads it, writes it as output, or has it as a shard; the implicit local backend for
// a queue no binding mentions. A tenant that does not exist is an error.
func (c *Config) QueueBackend(tenant, queue string) (string, error) {
	t, ok := c.Tenants[tenant]
	if !ok {
		return "", fmt.Errorf("tenant %q: %w", tenant, ErrNotConfigured)
	}
	base := strings.TrimSuffix(queue, PoisonSuffix)
	for _, b := range t.Bindings {
		if b.Queue == queue || b.Output == queue || b.Queue == base || b.Output == base {
			return b.Backend, nil
		}
		for _, s := range b.Shards {
			if s == queue || s == base {
				return b.Backend, nil
			}
		}
	}
	return DefaultBackend, nil
}
