package host

import (
	"maps"
	"slices"
	"strings"
)

// The serving set: the tenants and bindings the host serves now, under Host.servingMu, which
// is held only to read or change them, never while another lock is taken.

// tenantNamed returns the tenant serving under name, or nil.
func (h *Host) tenantNamed(name string) *tenant {
	h.servingMu.RLock()
	defer h.servingMu.RUnlock()
	return h.tenants[name]
}

// tenantList returns the tenants serving now, sorted by name.
func (h *Host) tenantList() []*tenant {
	h.servingMu.RLock()
	defer h.servingMu.RUnlock()
	ts := slices.Collect(maps.Values(h.tenants))
	slices.SortFunc(ts, func(a, b *tenant) int { return strings.Compare(a.name, b.name) })
	return ts
}

// setTenant makes t serve under name, or removes name when t is nil.
func (h *Host) setTenant(name string, t *tenant) {
	h.servingMu.Lock()
	defer h.servingMu.Unlock()
	if t == nil {
		delete(h.tenants, name)
		return
	}
	h.tenants[name] = t
}

// bindings returns the bindings serving now.
func (h *Host) bindings() []*binding {
	h.servingMu.RLock()
	defer h.servingMu.RUnlock()
	return slices.Clone(h.binds)
}

// setBindings makes bs, built by New, the bindings serving.
func (h *Host) setBindings(bs []*binding) {
	h.servingMu.Lock()
	defer h.servingMu.Unlock()
	h.binds = bs
}

// addServing lists b with the bindings serving, in (tenant, name) order.
func (h *Host) addServing(b *binding) {
	h.servingMu.Lock()
	defer h.servingMu.Unlock()
	h.binds = append(h.binds, b)
	slices.SortFunc(h.binds, func(x, y *binding) int {
		return strings.Compare(x.tenant.name+"\x00"+x.name, y.tenant.name+"\x00"+y.name)
	})
}

// removeServing drops b from the bindings serving.
func (h *Host) removeServing(b *binding) {
	h.servingMu.Lock()
	defer h.servingMu.Unlock()
	h.binds = slices.DeleteFunc(h.binds, func(x *binding) bool { return x == b })
}
