package config

import (
	"fmt"
	"maps"
	"net"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/wqhost/wqhost/internal/defaults"
	"github.com/wqhost/wqhost/listener/queue"
)

// Ranges checked at load.
const (
	MaxBatchSize       = queue.MaxBatch      // Azure Queue Storage's receive limit, honoured by every backend
	MaxVisibility      = queue.MaxVisibility // Azure's longest visibility timeout
	MaxDequeueCountCap = 1000
	MaxWorkersCap      = 1024
	MaxInstancesCap    = 1024
	MaxMemory          = ByteSize(4 << 30) // wasm32 address space
	MinMemory          = ByteSize(1 << 20)
	MaxMessageBytesCap = ByteSize(64 << 20)
	// MaxBatchMessages caps batch.max_messages (AWS Lambda's SQS trigger allows as many).
	MaxBatchMessages = defaults.MaxBatchMessages
	// MaxBatchWait caps batch.max_wait: a batch holds its leases (renewed) that long.
	MaxBatchWait = 15 * time.Minute
	// MaxCallOutputBytesCap caps limits.max_call_output_bytes.
	MaxCallOutputBytesCap = ByteSize(1 << 30)
	MaxTimeout            = time.Hour
	MaxWeight             = 1000
	MaxConcurrencyCap     = 100000
	// MaxBindingsCap caps max_bindings itself: 50 times the largest host measured.
	MaxBindingsCap = 500000
)

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// validate checks the decoded config as a whole, one error per problem.
func (c *Config) validate() []error {
	var errs []error
	fail := func(path, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
	}
	if c.MaxBindings < 1 || c.MaxBindings > MaxBindingsCap {
		fail("max_bindings", "%d is outside 1..%d", c.MaxBindings, MaxBindingsCap)
	} else if n := c.bindingCount(); n > c.MaxBindings {
		// Refused for its size alone, before a check per binding: a config of 162,000
		// bindings fails at once with the two numbers.
		errs = append(errs, tooManyBindings(n, c.MaxBindings))
		return errs
	}
	if strings.TrimSpace(c.DataDir) == "" {
		fail("data_dir", "must not be empty")
	}
	if c.MaxConcurrency < 0 || c.MaxConcurrency > MaxConcurrencyCap {
		fail("max_concurrency", "%d is outside 0..%d", c.MaxConcurrency, MaxConcurrencyCap)
	}
	if c.Admin.Addr != "off" {
		if host, port, err := net.SplitHostPort(c.Admin.Addr); err != nil || port == "" {
			fail("admin.addr", "%q is not host:port (or \"off\")", c.Admin.Addr)
		} else if !AdminLoopback(host) && c.Admin.TokenEnv == "" && !c.Admin.AllowUnauthenticated {
			fail("admin.addr", "%q is reachable beyond loopback but admin.token_env is not set: anyone on the network could reload, notify and read status; set admin.token_env, or admin.allow_unauthenticated: true to accept that", c.Admin.Addr)
		}
	}
	c.validateMemoryBudgets(fail)
	c.validateShutdown(fail)
	if c.MaxModuleBytes < 1 || c.MaxModuleBytes > 4<<30 {
		fail("max_module_bytes", "%s is outside 1..4GiB", c.MaxModuleBytes)
	}
	if c.Admin.MaxBodyBytes <= 0 || c.Admin.MaxBodyBytes > 16<<20 {
		fail("admin.max_body_bytes", "%d is outside 1..16MiB", c.Admin.MaxBodyBytes)
	}
	checkEnvName(fail, "admin.token_env", c.Admin.TokenEnv)
	oneOf(fail, "log.format", c.Log.Format, "text", "json")
	oneOf(fail, "log.level", c.Log.Level, "debug", "info", "warn", "error")

	for _, name := range slices.Sorted(maps.Keys(c.Backends)) {
		b := c.Backends[name]
		path := "backends." + name
		if !nameRE.MatchString(name) {
			fail(path, "name %q must be lower-case letters, digits, '-' or '_' (at most 63)", name)
		}
		c.validateBackend(fail, path, b)
	}

	if len(c.Tenants) == 0 {
		fail("tenants", "no tenant configured: a host needs at least one binding")
	}
	type consumer struct{ backend, queue string }
	consumers := map[consumer]string{}
	// Every admin token must be distinct (host/admin authenticates a token as one principal):
	// two keys naming one variable are refused here, equal values at start and reload.
	tokenKeys := map[string]string{}
	if c.Admin.TokenEnv != "" {
		tokenKeys[c.Admin.TokenEnv] = "admin.token_env"
	}
	for _, tn := range slices.Sorted(maps.Keys(c.Tenants)) {
		t := c.Tenants[tn]
		tp := "tenants." + tn
		types := map[string]bool{"": true}
		for _, b := range t.Bindings {
			if be, ok := c.BackendFor(b.Backend); ok {
				types[be.Type] = true
			}
		}
		for _, typ := range slices.Sorted(maps.Keys(types)) {
			if err := checkTenantName(typ, tn); err != nil {
				fail(tp, "%v", err)
				break
			}
		}
		if t.Weight < 1 || t.Weight > MaxWeight {
			fail(tp+".weight", "%d is outside 1..%d", t.Weight, MaxWeight)
		}
		if t.MaxConcurrency < 0 || t.MaxConcurrency > MaxConcurrencyCap {
			fail(tp+".max_concurrency", "%d is outside 0..%d (0 = no cap)", t.MaxConcurrency, MaxConcurrencyCap)
		}
		checkEnvName(fail, tp+".token_env", t.TokenEnv)
		if first, ok := tokenKeys[t.TokenEnv]; ok && t.TokenEnv != "" {
			fail(tp+".token_env", "names %s, as %s does: every admin token must be distinct", t.TokenEnv, first)
		} else if t.TokenEnv != "" {
			tokenKeys[t.TokenEnv] = tp + ".token_env"
		}
		l := t.Limits
		if l.Memory < MinMemory || l.Memory > MaxMemory {
			fail(tp+".limits.memory", "%s is outside %s..%s", l.Memory, MinMemory, MaxMemory)
		}
		if l.Timeout <= 0 || l.Timeout > MaxTimeout {
			fail(tp+".limits.timeout", "%s is outside 1ns..%s", l.Timeout, MaxTimeout)
		}
		if l.Instances < 1 || l.Instances > MaxInstancesCap {
			fail(tp+".limits.instances", "%d is outside 1..%d", l.Instances, MaxInstancesCap)
		}
		if l.MaxMessageBytes < 1 || l.MaxMessageBytes > MaxMessageBytesCap {
			fail(tp+".limits.max_message_bytes", "%s is outside 1..%s", l.MaxMessageBytes, MaxMessageBytesCap)
		}
		validateHTTPConcurrency(fail, tp, l.HTTPConcurrency)
		if l.MaxOutputBytes < 1 || l.MaxOutputBytes > MaxMessageBytesCap {
			fail(tp+".limits.max_output_bytes", "%s is outside 1..%s", l.MaxOutputBytes, MaxMessageBytesCap)
		}
		if l.MaxOutputTotalBytes != 0 && (l.MaxOutputTotalBytes < l.MaxOutputBytes || l.MaxOutputTotalBytes > 64*MaxMessageBytesCap) {
			fail(tp+".limits.max_output_total_bytes", "%s is outside max_output_bytes %s..%s (0 = 4 × max_output_bytes)", l.MaxOutputTotalBytes, l.MaxOutputBytes, 64*MaxMessageBytesCap)
		}
		if l.MaxCallOutputBytes < 0 || l.MaxCallOutputBytes > MaxCallOutputBytesCap {
			fail(tp+".limits.max_call_output_bytes", "%s is outside 0..%s (0 = 64MiB)", l.MaxCallOutputBytes, MaxCallOutputBytesCap)
		}
		validateCompileLimits(fail, tp+".limits.compile", l.Compile)
		validateFuelQuota(fail, tp+".limits.fuel_quota", l.FuelQuota)
		if len(t.Bindings) == 0 {
			fail(tp+".bindings", "tenant has no binding")
		}
		for _, bn := range slices.Sorted(maps.Keys(t.Bindings)) {
			b := t.Bindings[bn]
			bp := tp + ".bindings." + bn
			if !nameRE.MatchString(bn) {
				fail(bp, "binding name %q must be lower-case letters, digits, '-' or '_' (at most 63)", bn)
			}
			c.validateBinding(fail, bp, tn, t, b)
			queues := b.Shards
			if len(queues) == 0 {
				queues = []string{b.Queue}
			}
			for _, q := range queues {
				key := consumer{b.Backend, c.PhysicalQueue(tn, b.Backend, q)}
				if other, dup := consumers[key]; dup {
					fail(bp+".queue", "queue %q is already consumed by %s", q, other)
				} else {
					consumers[key] = bp
				}
			}
		}
	}
	return errs
}

type failFunc func(path, format string, args ...any)

// bindingCount is the number of bindings of every tenant together.
// tooManyBindings is the problem of a config with n bindings over max_bindings' limit.
func tooManyBindings(n, limit int) error {
	return fmt.Errorf("max_bindings: %d bindings configured, the limit is %d", n, limit)
}

func (c *Config) bindingCount() int {
	n := 0
	for _, t := range c.Tenants {
		n += len(t.Bindings)
	}
	return n
}

func oneOf(fail failFunc, path, v string, allowed ...string) {
	for _, a := range allowed {
		if v == a {
			return
		}
	}
	fail(path, "%q is not one of %s", v, strings.Join(allowed, ", "))
}

var envRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func checkEnvName(fail failFunc, path, v string) {
	if v != "" && !envRE.MatchString(v) {
		fail(path, "%q is not an environment variable name", v)
	}
}

// within reports whether path p lies inside dir (both cleaned, absolute or both relative).
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

func (c *Config) validateBackend(fail failFunc, path string, b Backend) {
	switch b.Type {
	case BackendLocal:
		oneOf(fail, path+".sync", b.Sync, "full", "normal")
		if b.Path == "" {
			fail(path+".path", "must not be empty")
		} else if !filepath.IsAbs(b.Path) && !within(".", filepath.Clean(b.Path)) {
			fail(path+".path", "%q escapes data_dir (use a path under data_dir or an absolute path)", b.Path)
		}
		if b.ConnectionStringEnv != "" || b.AccountName != "" || b.SASURLEnv != "" || b.ServiceURL != "" || b.DefaultCredential {
			fail(path, "azure keys given for a backend of type local")
		}
	case BackendAzure:
		oneOf(fail, path+".encoding", b.Encoding, "base64", "text")
		n := 0
		if b.ConnectionStringEnv != "" {
			n++
		}
		if b.AccountName != "" && b.AccountKeyEnv != "" {
			n++
		} else if b.AccountKeyEnv != "" {
			fail(path+".account_name", "required with account_key_env")
		}
		if b.SASURLEnv != "" {
			n++
		}
		if b.DefaultCredential {
			n++
			if b.ServiceURL == "" && b.AccountName == "" {
				fail(path+".service_url", "default_credential needs service_url or account_name")
			}
		}
		if n != 1 {
			fail(path, "exactly one of connection_string_env, account_name+account_key_env, sas_url_env, default_credential is required (got %d)", n)
		}
		for _, e := range []struct{ k, v string }{
			{"connection_string_env", b.ConnectionStringEnv}, {"account_key_env", b.AccountKeyEnv}, {"sas_url_env", b.SASURLEnv},
		} {
			checkEnvName(fail, path+"."+e.k, e.v)
		}
		if b.PoisonTTL < 0 {
			fail(path+".poison_ttl", "must not be negative")
		}
		if b.PoisonFormat != "" {
			oneOf(fail, path+".poison_format", b.PoisonFormat, "envelope", "raw")
		}
		if b.IdleCallsPerHour < 0 || b.IdleCallsPerHour > defaults.MaxIdleCallsPerHour {
			fail(path+".idle_calls_per_hour", "%d is outside 0..%d", b.IdleCallsPerHour, defaults.MaxIdleCallsPerHour)
		}
	case BackendNATS:
		validateNATS(fail, path, b)
	case BackendMemory:
	default:
		fail(path+".type", "%q is not one of local, azure, nats, memory", b.Type)
	}
	if b.Type != BackendNATS && len(b.NATS.URLs)+len(b.NATS.Queues) > 0 {
		fail(path+".nats", "nats keys given for a backend of type %s", b.Type)
	}
	if b.PoisonFormat != "" && b.Type != BackendAzure {
		fail(path+".poison_format", "applies to azure backends only: local, memory and nats dead letters keep their attributes beside the body")
	}
	if b.IdleCallsPerHour != 0 && (b.Type == BackendLocal || b.Type == BackendMemory || b.Type == BackendNATS) {
		fail(path+".idle_calls_per_hour", "applies to azure backends only: a %s backend wakes its idle bindings when a message arrives", b.Type)
	}
}

func (c *Config) validateBinding(fail failFunc, bp, tenant string, t Tenant, b Binding) {
	validateHTTP(fail, bp, b.HTTP)
	if _, ok := c.BackendFor(b.Backend); !ok {
		fail(bp+".backend", "%q is not a configured backend (known: %s)", b.Backend, strings.Join(append(slices.Sorted(maps.Keys(c.Backends)), DefaultBackend), ", "))
	}
	checkQueue := func(path, q string) {
		if err := CheckQueueName(q); err != nil {
			fail(path, "%v", err)
		}
	}
	if b.Queue == "" {
		fail(bp+".queue", "required (with shards: the logical name of the sharded queue)")
	} else {
		checkQueue(bp+".queue", b.Queue)
	}
	if len(b.Shards) > 0 {
		seen := map[string]bool{}
		for i, s := range b.Shards {
			checkQueue(fmt.Sprintf("%s.shards[%d]", bp, i), s)
			if seen[s] {
				fail(fmt.Sprintf("%s.shards[%d]", bp, i), "shard %q listed twice", s)
			}
			seen[s] = true
		}
	}
	if b.Output != "" {
		checkQueue(bp+".output", b.Output)
		if b.Output == b.Queue {
			fail(bp+".output", "output %q is the binding's own input queue (a loop)", b.Output)
		}
	}
	if be, ok := c.BackendFor(b.Backend); ok && ValidQueueName(b.Queue) && (b.Output == "" || ValidQueueName(b.Output)) {
		// The backend's own rule (Azure: 3..63 characters) on the names the binding uses,
		// after the tenant prefix and the poison suffix.
		for _, q := range append([]string{b.Queue, b.Queue + PoisonSuffix, b.Output}, b.Shards...) {
			if q == "" {
				continue
			}
			if err := checkPhysical(be.Type, physicalQueue(be.Type, tenant, q)); err != nil {
				key := bp + ".queue"
				if q == b.Output {
					key = bp + ".output"
				}
				fail(key, "%v", err)
				break // the longest names follow from the first: one problem to fix
			}
		}
	}
	if b.Ordered {
		c.validateOrdered(fail, bp, b)
	}
	oneOf(fail, bp+".abi", b.ABI, ABIWqhostV1, ABIWasiStdio, ABIExtism)
	if b.Function != "" && b.ABI == ABIWasiStdio {
		fail(bp+".function", "is the function an Extism plugin's calls run; a %s program runs its _start", ABIWasiStdio)
	}
	c.validateModule(fail, bp+".module", t, b.Module)

	if b.BatchSize < 1 || b.BatchSize > MaxBatchSize {
		if b.BatchSize > MaxBatchSize {
			fail(bp+".batch_size", "%d is above the maximum %d", b.BatchSize, MaxBatchSize)
		} else {
			fail(bp+".batch_size", "%d is below the minimum 1", b.BatchSize)
		}
	}
	validateBatch(fail, bp, b)
	if b.VisibilityTimeout < time.Second || b.VisibilityTimeout > MaxVisibility {
		fail(bp+".visibility_timeout", "%s is outside 1s..%s", b.VisibilityTimeout, MaxVisibility)
	}
	if b.MaxDequeueCount < 1 || b.MaxDequeueCount > MaxDequeueCountCap {
		fail(bp+".max_dequeue_count", "%d is outside 1..%d", b.MaxDequeueCount, MaxDequeueCountCap)
	}
	if b.MaxWorkers < 1 || b.MaxWorkers > MaxWorkersCap {
		fail(bp+".max_workers", "%d is outside 1..%d", b.MaxWorkers, MaxWorkersCap)
	}
	switch {
	case b.MinWorkers < 0:
		fail(bp+".min_workers", "%d is negative", b.MinWorkers)
	case b.MinWorkers > b.MaxWorkers:
		fail(bp+".min_workers", "%d is above max_workers %d", b.MinWorkers, b.MaxWorkers)
	case b.MinWorkers == 0 && !b.Push:
		fail(bp+".min_workers", "0 needs push: true (otherwise nothing would ever receive)")
	}

	if b.PushFallbackPoll < 0 || b.PushFallbackPoll > 24*time.Hour {
		fail(bp+".push_fallback_poll", "%s is outside 0..24h (0 turns the safety-net poll off)", b.PushFallbackPoll)
	}

	c.validatePlugin(fail, bp+".backoff", b.Backoff.PluginRef)
	if !slices.Contains(defaults.BackoffNames(), b.Backoff.Policy) {
		fail(bp+".backoff.policy", "unknown policy %q (known: %s)", b.Backoff.Policy, strings.Join(defaults.BackoffNames(), ", "))
	}
	if b.Backoff.Min <= 0 {
		fail(bp+".backoff.min", "%s must be positive", b.Backoff.Min)
	}
	if b.Backoff.Max < b.Backoff.Min {
		fail(bp+".backoff.max", "%s is below backoff.min %s", b.Backoff.Max, b.Backoff.Min)
	}

	c.validatePlugin(fail, bp+".scaler", b.Scaler.PluginRef)
	switch b.Scaler.Policy {
	case ScalerDepthTable:
		if b.Scaler.Target != 0 {
			fail(bp+".scaler.target", "applies to the target policy, not depth-table")
		}
		for i, r := range b.Scaler.Table {
			p := fmt.Sprintf("%s.scaler.table[%d]", bp, i)
			if r.Depth < 0 || r.Workers < 0 {
				fail(p, "depth and workers must not be negative")
			}
			if i > 0 && r.Depth <= b.Scaler.Table[i-1].Depth {
				fail(p+".depth", "%d is not above the previous row's %d (rows must ascend)", r.Depth, b.Scaler.Table[i-1].Depth)
			}
		}
	case ScalerTarget:
		if b.Scaler.Target < 0 {
			// 0 is plugins/builtin's DefaultTargetPerWorker: one receive batch per worker.
			fail(bp+".scaler.target", "%d is negative (messages per worker; 0 = %d)", b.Scaler.Target, queue.MaxBatch)
		}
		if len(b.Scaler.Table) > 0 {
			fail(bp+".scaler.table", "applies to the depth-table policy, not target")
		}
	default:
		fail(bp+".scaler.policy", "unknown policy %q (known: %s)", b.Scaler.Policy, strings.Join(defaults.ScalerNames(), ", "))
	}

	c.validatePlugin(fail, bp+".poison", b.Poison.PluginRef)
	if !slices.Contains(defaults.PoisonNames(), b.Poison.Policy) {
		fail(bp+".poison.policy", "unknown policy %q (known: %s)", b.Poison.Policy, strings.Join(defaults.PoisonNames(), ", "))
	}
	if !(b.Poison.Jitter >= 0 && b.Poison.Jitter <= 1) {
		fail(bp+".poison.jitter", "%v is outside 0..1 (a fraction of each retry delay: 0.1 = ±10 %%, 0 = none)", b.Poison.Jitter)
	}
	if b.Poison.BaseDelay < 0 {
		fail(bp+".poison.base_delay", "%s is negative", b.Poison.BaseDelay)
	}
	if b.Poison.MaxDelay < b.Poison.BaseDelay {
		fail(bp+".poison.max_delay", "%s is below poison.base_delay %s", b.Poison.MaxDelay, b.Poison.BaseDelay)
	} else if b.Poison.MaxDelay > MaxVisibility {
		fail(bp+".poison.max_delay", "%s is above the maximum %s", b.Poison.MaxDelay, MaxVisibility)
	}

	validateBreaker(fail, bp, b.Breaker)

	p := b.Pool
	if p.MaxInstances < 1 || p.MaxInstances > t.Limits.Instances {
		fail(bp+".pool.max_instances", "%d is outside 1..%d (tenants.%s.limits.instances)", p.MaxInstances, t.Limits.Instances, tenant)
	}
	if p.MinInstances < 0 || p.MinInstances > p.MaxInstances {
		fail(bp+".pool.min_instances", "%d is outside 0..pool.max_instances %d", p.MinInstances, p.MaxInstances)
	}
	if p.MaxUses < 0 {
		fail(bp+".pool.max_uses", "%d is negative (0 = no limit)", p.MaxUses)
	}
	if p.IdleTimeout < 0 || p.IdleTimeout > MaxVisibility {
		fail(bp+".pool.idle_timeout", "%s is outside 0..%s (0 = never)", p.IdleTimeout, MaxVisibility)
	}
	if p.MaxMemory < 0 || p.MaxMemory > t.Limits.Memory {
		fail(bp+".pool.max_memory", "%s is outside 0..%s (tenants.%s.limits.memory)", p.MaxMemory, t.Limits.Memory, tenant)
	}
}

// ModulePath resolves a file module reference against the config's base directory; it
// returns "" for builtin: references. It is lexical: host/source finds and reads the file.
func (c *Config) ModulePath(ref string) string {
	if strings.HasPrefix(ref, BuiltinPrefix) || ref == "" {
		return ""
	}
	if filepath.IsAbs(ref) {
		return filepath.Clean(ref)
	}
	return filepath.Join(c.BaseDir, ref)
}

// InModuleDir reports whether module reference ref of tenant t may be loaded: a builtin:
// or empty reference, a tenant without module_dir, or a file inside module_dir. It is
// lexical, so a config is checked against it without touching the file system, and
// host/source leaves a reference outside alone (no stat of another tenant's files).
func (c *Config) InModuleDir(t Tenant, ref string) bool {
	p := c.ModulePath(ref)
	if p == "" || t.ModuleDir == "" {
		return true
	}
	dir := t.ModuleDir
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(c.BaseDir, dir)
	}
	return within(filepath.Clean(dir), p)
}

// validateModule checks what a module reference says without looking for the module: an
// empty reference, an unknown builtin: name and a missing or unreadable file are host/source's
// findings (Check), which a host joins to this report at load.
func (c *Config) validateModule(fail failFunc, path string, t Tenant, ref string) {
	if !c.InModuleDir(t, ref) {
		fail(path, "%q is outside the tenant's module_dir %s", ref, t.ModuleDir)
	}
}

// validatePlugin checks a policy's plugin settings; whether the binary exists and may run
// is host/source's finding (Check).
func (c *Config) validatePlugin(fail failFunc, path string, p PluginRef) {
	if p.Plugin == "" {
		if len(p.Args) > 0 || len(p.Env) > 0 || p.Timeout != 0 {
			fail(path+".plugin", "args, env or timeout given without plugin")
		}
		return
	}
	if p.Timeout < 0 || p.Timeout > 10*time.Second {
		fail(path+".timeout", "%s is outside 0..10s (0 = default %s)", p.Timeout, DefaultPluginTimeout)
	}
	for k := range p.Env {
		if !envRE.MatchString(k) {
			fail(path+".env."+k, "not an environment variable name")
		}
	}
}

// PluginPath resolves a plugin binary path against the config's base directory (lexical).
func (c *Config) PluginPath(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(c.BaseDir, p)
}

// validateBatch checks a binding's batch block.
func validateBatch(fail failFunc, bp string, b Binding) {
	bt := b.Batch
	if bt.MaxMessages < 0 || bt.MaxMessages > MaxBatchMessages {
		fail(bp+".batch.max_messages", "%d is outside 0..%d (0 or 1: one message per call)", bt.MaxMessages, MaxBatchMessages)
	}
	if bt.MaxWait < 0 || bt.MaxWait > MaxBatchWait {
		fail(bp+".batch.max_wait", "%s is outside 0..%s", bt.MaxWait, MaxBatchWait)
	}
	if bt.MaxBytes < 0 {
		fail(bp+".batch.max_bytes", "%s is negative", bt.MaxBytes)
	}
	if bt.MaxMessages > 1 && b.ABI == ABIWasiStdio {
		fail(bp+".batch", "needs abi %s (a wasi-stdio program handles one message per run)", ABIWqhostV1)
	}
	if bt.MaxMessages > 1 && b.ABI == ABIExtism {
		fail(bp+".batch", "needs abi %s (an Extism plugin handles one message per call)", ABIWqhostV1)
	}
}

// validateFuelQuota checks a tenant's fuel quota: off (both 0), or a positive fuel and a
// period within MinFuelQuotaPeriod..MaxFuelQuotaPeriod.
func validateFuelQuota(fail func(key, format string, args ...any), key string, q FuelQuota) {
	switch {
	case q.Fuel < 0:
		fail(key+".fuel", "%d is negative (0 = no quota)", q.Fuel)
	case q.Fuel == 0 && q.Period != 0:
		fail(key+".fuel", "period %s is set but fuel is 0: give the fuel per period (0 for both = no quota)", q.Period)
	case q.Fuel > 0 && (q.Period < MinFuelQuotaPeriod || q.Period > MaxFuelQuotaPeriod):
		fail(key+".period", "%s is outside %s..%s", q.Period, MinFuelQuotaPeriod, MaxFuelQuotaPeriod)
	}
}

// validateCompileLimits checks a tenant's compile caps: each 0 (the default) or positive and
// at most a generous ceiling, past which a cap no longer bounds anything.
func validateCompileLimits(fail func(key, format string, args ...any), key string, c CompileLimits) {
	for _, f := range []struct {
		name     string
		v, limit int64
	}{
		{"max_functions", int64(c.MaxFunctions), 1_000_000},
		{"max_function_bytes", int64(c.MaxFunctionBytes), 64 << 20},
		{"max_nesting_depth", int64(c.MaxNestingDepth), 100_000},
		{"max_loop_depth", int64(c.MaxLoopDepth), 100_000},
		{"max_branches", int64(c.MaxBranches), 1_000_000},
		{"max_locals", int64(c.MaxLocals), 1_000_000},
	} {
		if f.v < 0 || f.v > f.limit {
			fail(key+"."+f.name, "%d is outside 0..%d (0 = the default)", f.v, f.limit)
		}
	}
	if c.Timeout < 0 || c.Timeout > time.Hour {
		fail(key+".timeout", "%s is outside 0..1h (0 = 2m)", c.Timeout)
	}
	if c.Memory < 0 || c.Memory != 0 && c.Memory < 64<<20 || c.Memory > 64<<30 {
		fail(key+".memory", "%s is outside 64MiB..64GiB (0 = 1GiB)", c.Memory)
	}
}
