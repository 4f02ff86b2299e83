package outcome

import "fmt"

// Cause is why a handler call failed, as the host classified it once, where the runtime's
// result became the Outcome: the breaker, the attempt log and `wqhost call` read it rather
// than the runtime's errors. The zero Cause is CauseNone: the call did not fail (a verdict,
// done, retry or reject, or a policy's answer).
type Cause uint8

// The causes of a failed call.
const (
	// CauseNone: the call did not fail.
	CauseNone Cause = iota
	// CauseTimeout: the guest ran past its time limit (also when it then had to be
	// abandoned still running).
	CauseTimeout
	// CauseTrap: the guest trapped (unreachable, a bad memory access, misuse of a host
	// function).
	CauseTrap
	// CauseMemoryLimit: the guest needed more linear memory than its limit allows.
	CauseMemoryLimit
	// CauseStackOverflow: the guest's calls nested deeper than the call stack allows.
	CauseStackOverflow
	// CauseBadStatus: the guest returned a status (or a wasi-stdio exit code) the ABI does
	// not know.
	CauseBadStatus
	// CausePluginFailed: an Extism plugin reported a failure (a non-zero code or error_set).
	CausePluginFailed
	// CauseOutputRefused: the call's outputs could not go: refused by the runtime (over a
	// limit) or failing to send.
	CauseOutputRefused
	// CauseBudgetRefused: the tenant's memory budget refused what the call needed (its
	// message body, an instance, or guest memory); not the guest's limit, the host's room,
	// and another try may find it.
	CauseBudgetRefused
	// CauseHost: the host's side ended or refused the call (shutdown, a reload closing the
	// pool, the caller's context, an instance that could not start), or any other failure.
	CauseHost
)

// String returns the cause's name as logs, dead letters' attempts and `wqhost call` show it.
func (c Cause) String() string {
	switch c {
	case CauseNone:
		return "none"
	case CauseTimeout:
		return "timeout"
	case CauseTrap:
		return "trap"
	case CauseMemoryLimit:
		return "memory_limit"
	case CauseStackOverflow:
		return "stack_overflow"
	case CauseBadStatus:
		return "bad_status"
	case CausePluginFailed:
		return "plugin_failed"
	case CauseOutputRefused:
		return "output_refused"
	case CauseBudgetRefused:
		return "budget_refused"
	case CauseHost:
		return "host"
	}
	return fmt.Sprintf("cause(%d)", uint8(c))
}
