// Package faulttest is wqhost's fault suite: tests that build the real wqhost binary, run it
// as a child process on a config they write, and try hard to break its promises — SIGKILL in
// the middle of a drain, a storage outage, a full or read-only disk, hostile guests, hostile
// messages, hostile configs and admin requests. Each fault test prints one line
//
//	fault <name>: sent=N processed=N lost=N duplicated=N
//
// and fails if a message was lost or duplicates exceed what was in flight when the fault hit.
// TestFaultBudget runs the real image instead, under podman with a 1 GiB memory limit, a
// hostile tenant beside a healthy one (issue #37), and prints
//
//	fault budget: oom-kills=N healthy-lost=N healthy-ratio=R host-peak=M MiB budget=B MiB refused=N
//
// The depth rows print `depth freshness: backend=B lag_p99=…s error_max=…%` (the reported
// depth against the store's own count during a drain) and the scale-in rows
// `fault scale-in-release: backend=B releases=N attempts_spent=S lost=L`.
//
// Run it with `go test -run Fault -v ./faulttest` (docs/guarantees.md maps each promise to
// its test).
package faulttest
