package runtime

import "sync"

// compileLocks serialises wazero compiles of one module version across the engine's
// tenants. Runtimes sharing a compilation cache share wazero's engine, and wazero 1.12 makes
// a module loaded from the file cache visible to other runtimes before it has built the
// module's entry preambles (wazevo engine_cache.go, getCompiledModule): a second tenant
// compiling the same bytes at that moment gets a half-built module and panics instantiating
// it (moduleEngine.NewFunction: index out of range). Host starts and hot reloads load
// every version through that path, since the compile child fills the file cache. Compiles of
// different versions still run in parallel.
type compileLocks struct {
	mu sync.Mutex
	m  map[string]*compileLock
}

type compileLock struct {
	sync.Mutex
	waiters int
}

// lock takes key's lock and returns its release.
func (c *compileLocks) lock(key string) (unlock func()) {
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]*compileLock{}
	}
	l := c.m[key]
	if l == nil {
		l = &compileLock{}
		c.m[key] = l
	}
	l.waiters++
	c.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		c.mu.Lock()
		if l.waiters--; l.waiters == 0 {
			delete(c.m, key)
		}
		c.mu.Unlock()
	}
}
