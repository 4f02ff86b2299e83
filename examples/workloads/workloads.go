// Package workloads ships sample workloads inside the wqhost binary, so `wqhost run --demo`
// needs no files beside it.
package workloads

import (
	"bytes"
	_ "embed" // go:embed of the sample files
)

//go:generate sh -c "go run ./gen > billing-transactions.jsonl"

//go:embed billing-transactions.jsonl
var billing []byte

// Billing workload shape: BillingTotal transactions, of which BillingMalformed are ones the
// billing-go handler rejects (bad JSON, missing fields, bad quantities), so a run shows the
// poison path too.
const (
	BillingTotal     = 3000
	BillingMalformed = 12
)

// BillingTransactions returns the billing sample, one message body per line of
// billing-transactions.jsonl, in the billing-go handler's input shape. The slices are fresh
// copies: callers may keep or modify them.
func BillingTransactions() [][]byte {
	lines := bytes.Split(bytes.TrimSuffix(billing, []byte("\n")), []byte("\n"))
	out := make([][]byte, len(lines))
	for i, l := range lines {
		out[i] = bytes.Clone(l)
	}
	return out
}
