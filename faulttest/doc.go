// Package faulttest is wqhost's fault suite: tests that build the real wqhost binary, run it
// as a child process on a config they write, and try hard to break its promises — SIGKILL in
// the middle of a drain, a storage outage, a full or read-only disk, hostile guests, hostile
// messages, hostile configs and admin requests. Each fault test prints one line
//
//	fault <name>: sent=N processed=N lost=N duplicated=N
//
// and fails if a message was lost or duplicates exceed what was in flight when the fault hit.
// Run it with `go test -run Fault -v ./faulttest` (docs/guarantees.md maps each promise to
// its test).
package faulttest
