// Command gen writes billing-transactions.jsonl, the sample workload that `wqhost run --demo`
// processes through the billing-go handler. It is deterministic (fixed seed), so the committed
// file is reproducible:
//
//	go run ./examples/workloads/gen > examples/workloads/billing-transactions.jsonl
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
)

type item struct {
	SKU       string  `json:"sku"`
	Quantity  int     `json:"quantity"`
	UnitPrice float64 `json:"unit_price"`
}

type tx struct {
	ID       string  `json:"id"`
	Account  string  `json:"account"`
	Currency string  `json:"currency"`
	Amount   float64 `json:"amount,omitempty"`
	Items    []item  `json:"items,omitempty"`
}

// total and malformed set the workload's shape; workloads_test.go checks the file against them.
const (
	total     = 3000
	malformed = 12
)

var (
	accounts   = []string{"acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "wonka", "tyrell", "cyberdyne", "soylent", "vandelay"}
	currencies = []string{"EUR", "USD", "GBP", "CHF"}
	skus       = []struct {
		sku   string
		price float64
	}{
		{"storage-gb-month", 0.02}, {"egress-gb", 0.09}, {"vm-hour-small", 0.0416}, {"vm-hour-large", 0.384},
		{"queue-ops-10k", 0.004}, {"support-plan", 99}, {"ssl-cert", 15}, {"backup-gb", 0.05},
		{"seat-monthly", 12.5}, {"api-calls-1m", 3.5},
	}
)

// bad are transactions the billing handler rejects, each for a different reason, so the demo's
// poison queue shows them with readable reasons.
var bad = []string{
	`{"id":"tx-bad-json","account":"acme","currency":"EUR","items":[{"sku":"egress-gb","quantity":3,`,
	`{"account":"globex","currency":"USD","amount":12.5}`,
	`{"id":"tx-bad-noaccount","currency":"EUR","amount":40}`,
	`{"id":"tx-bad-nocurrency","account":"hooli","items":[{"sku":"seat-monthly","quantity":2,"unit_price":12.5}]}`,
	`{"id":"tx-bad-empty","account":"stark","currency":"GBP"}`,
	`{"id":"tx-bad-negative","account":"wayne","currency":"USD","amount":-20}`,
	`{"id":"tx-bad-qty0","account":"wonka","currency":"EUR","items":[{"sku":"ssl-cert","quantity":0,"unit_price":15}]}`,
	`{"id":"tx-bad-price","account":"tyrell","currency":"CHF","items":[{"sku":"vm-hour-large","quantity":4,"unit_price":-0.384}]}`,
	`{"id":"tx-bad-type","account":"initech","currency":"EUR","items":[{"sku":"backup-gb","quantity":"ten","unit_price":0.05}]}`,
	`not json at all`,
	`{"id":"tx-bad-amount-string","account":"vandelay","currency":"EUR","amount":"12.50"}`,
	`{"id":"tx-bad-qtyneg","account":"soylent","currency":"USD","items":[{"sku":"egress-gb","quantity":-3,"unit_price":0.09}]}`,
}

func main() {
	if len(bad) != malformed {
		fmt.Fprintf(os.Stderr, "gen: %d malformed lines, want %d\n", len(bad), malformed)
		os.Exit(1)
	}
	r := rand.New(rand.NewPCG(2026, 11))
	w := bufio.NewWriter(os.Stdout)
	every := total / malformed
	b := 0
	for i := 1; i <= total; i++ {
		if i%every == every/2 && b < len(bad) {
			fmt.Fprintln(w, bad[b])
			b++
			continue
		}
		t := tx{ID: fmt.Sprintf("tx-%06d", i), Account: accounts[r.IntN(len(accounts))], Currency: currencies[r.IntN(len(currencies))]}
		if r.IntN(5) == 0 {
			t.Amount = float64(r.IntN(500000)+100) / 100
		} else {
			for range r.IntN(4) + 1 {
				s := skus[r.IntN(len(skus))]
				t.Items = append(t.Items, item{SKU: s.sku, Quantity: r.IntN(200) + 1, UnitPrice: s.price})
			}
		}
		line, err := json.Marshal(t)
		if err != nil {
			fmt.Fprintln(os.Stderr, "gen:", err)
			os.Exit(1)
		}
		w.Write(line)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
