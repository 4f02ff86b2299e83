package console

import (
	"strconv"
	"strings"
)

// budgetUsage is a memory budget as GET /v1/status reports it (runtime.BudgetUsage): the
// host's, or one tenant's.
type budgetUsage struct {
	Limit      int64            `json:"limit_bytes"`
	Reserved   int64            `json:"reserved_bytes"`
	Peak       int64            `json:"peak_bytes"`
	ByConsumer map[string]int64 `json:"by_consumer"`
	Refused    int64            `json:"refused"`
}

// hostMemoryStatus is the top-level memory of GET /v1/status (host.MemoryStatus).
type hostMemoryStatus struct {
	budgetUsage
	LimitSource   string `json:"limit_source"`
	ProcessLimit  int64  `json:"process_limit_bytes"`
	ResidentBytes int64  `json:"resident_bytes"`
}

// hostConsumers and tenantConsumers are the consumers the panel lists, in order; compile
// children reserve from the host's budget only.
var (
	hostConsumers   = []string{"instances", "kernel", "modules", "compile", "messages", "stacks", "host"}
	tenantConsumers = []string{"instances", "kernel", "modules", "messages", "stacks"}
)

// Amount is one consumer's reservation, as the panel shows it.
type Amount struct {
	Consumer string `json:"consumer"`
	Bytes    int64  `json:"bytes"`
	Text     string `json:"text"`
}

// Budget is one memory budget as the overview's Memory panel shows it: the figures, and
// their text (bytes in KiB/MiB/GiB, a 0 limit as "unlimited"), so the page and the script
// say the same.
type Budget struct {
	Name          string `json:"name"` // the tenant's; "host" for the host's
	LimitBytes    int64  `json:"limit_bytes"`
	ReservedBytes int64  `json:"reserved_bytes"`
	Limit         string `json:"limit"`
	Reserved      string `json:"reserved"`
	Peak          string `json:"peak"`
	// Fraction is Reserved of Limit (0..1, more when over); -1 for an unlimited budget.
	Fraction   float64  `json:"fraction"`
	Percent    string   `json:"percent"` // "42.0%", "" when unlimited
	ByConsumer []Amount `json:"by_consumer"`
	Refused    int64    `json:"refused"`
}

// HostBudget is the host's budget with where it came from and the process's memory.
type HostBudget struct {
	Budget
	Source   string `json:"source"`   // where the limit came from, in words
	Resident string `json:"resident"` // the process's resident memory
}

// Memory is the overview's Memory panel: the host's budget for the host's session only
// (nil for a tenant's, whose API answer must not reach it), and the budget of each tenant
// the page shows.
type Memory struct {
	Host    *HostBudget `json:"host,omitempty"`
	Tenants []Budget    `json:"tenants"`
}

func budget(name string, u budgetUsage, consumers []string) Budget {
	b := Budget{Name: name, LimitBytes: u.Limit, ReservedBytes: u.Reserved, Limit: "unlimited",
		Reserved: humanBytes(u.Reserved), Peak: humanBytes(u.Peak), Fraction: -1, Refused: u.Refused,
		ByConsumer: make([]Amount, 0, len(consumers))}
	if u.Limit > 0 {
		b.Limit = humanBytes(u.Limit)
		b.Fraction = float64(u.Reserved) / float64(u.Limit)
		b.Percent = strconv.FormatFloat(b.Fraction*100, 'f', 1, 64) + "%"
	}
	for _, c := range consumers {
		n := u.ByConsumer[c]
		b.ByConsumer = append(b.ByConsumer, Amount{Consumer: c, Bytes: n, Text: humanBytes(n)})
	}
	return b
}

func hostBudget(m *hostMemoryStatus) *HostBudget {
	h := &HostBudget{Budget: budget("host", m.budgetUsage, hostConsumers), Resident: humanBytes(m.ResidentBytes)}
	if m.ResidentBytes <= 0 {
		h.Resident = "unknown"
	}
	switch {
	case m.LimitSource == "memory_budget":
		h.Source = "memory_budget in the config"
	case m.ProcessLimit > 0:
		h.Source = "share of the process's limit, " + humanBytes(m.ProcessLimit) + " (" + m.LimitSource + ")"
	case m.LimitSource != "":
		h.Source = "no memory limit found (" + m.LimitSource + ")"
	default:
		h.Source = "unknown"
	}
	return h
}

// humanBytes is n in B, KiB, MiB, GiB or TiB, with one decimal when it has one ("512 MiB",
// "1.5 GiB").
func humanBytes(n int64) string {
	if n < 1024 && n > -1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	f, unit := float64(n), ""
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		f, unit = f/1024, u
		if f < 1024 && f > -1024 {
			break
		}
	}
	return strings.TrimSuffix(strconv.FormatFloat(f, 'f', 1, 64), ".0") + " " + unit
}
