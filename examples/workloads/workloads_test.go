package workloads

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"testing"
)

// TestBillingShape checks the counts the demo's summary is judged against: every well-formed
// line is a complete transaction the handler prices, exactly BillingMalformed are not, and ids
// are unique so outputs can be matched to inputs.
func TestBillingShape(t *testing.T) {
	msgs := BillingTransactions()
	if len(msgs) != BillingTotal {
		t.Fatalf("%d transactions, want %d", len(msgs), BillingTotal)
	}
	type item struct {
		Quantity  int     `json:"quantity"`
		UnitPrice float64 `json:"unit_price"`
	}
	var tx struct {
		ID, Account, Currency string
		Amount                float64
		Items                 []item
	}
	ids := map[string]bool{}
	bad := 0
	for i, m := range msgs {
		tx.ID, tx.Account, tx.Currency, tx.Amount, tx.Items = "", "", "", 0, nil
		ok := json.Unmarshal(m, &tx) == nil && tx.ID != "" && tx.Account != "" && tx.Currency != "" &&
			(len(tx.Items) > 0 || tx.Amount > 0)
		for _, it := range tx.Items {
			ok = ok && it.Quantity > 0 && it.UnitPrice >= 0
		}
		if !ok {
			bad++
			continue
		}
		if ids[tx.ID] {
			t.Errorf("line %d: duplicate id %q", i+1, tx.ID)
		}
		ids[tx.ID] = true
	}
	if bad != BillingMalformed {
		t.Errorf("%d malformed transactions, want %d", bad, BillingMalformed)
	}
}

// TestBillingCopies checks callers get their own bytes: the demo may hand them to a queue
// that keeps them.
func TestBillingCopies(t *testing.T) {
	a := BillingTransactions()
	a[0][0] = 'X'
	if b := BillingTransactions(); b[0][0] != '{' {
		t.Fatal("BillingTransactions returned shared memory")
	}
}

// TestGeneratorReproduces checks the committed file is what gen writes.
func TestGeneratorReproduces(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go run")
	}
	out, err := exec.Command("go", "run", "./gen").Output()
	if err != nil {
		t.Fatalf("go run ./gen: %v", err)
	}
	want, err := os.ReadFile("billing-transactions.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, want) {
		t.Fatal("billing-transactions.jsonl differs from `go run ./gen`; regenerate it with go generate")
	}
}
