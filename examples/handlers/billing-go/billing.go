package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// transaction is one customer transaction as it arrives on the queue.
type transaction struct {
	ID       string  `json:"id"`
	Account  string  `json:"account"`
	Currency string  `json:"currency"`
	Amount   float64 `json:"amount"`
	Items    []item  `json:"items"`
}

type item struct {
	SKU       string  `json:"sku"`
	Quantity  int     `json:"quantity"`
	UnitPrice float64 `json:"unit_price"`
}

// pricedLine is the billing output: amounts in integer cents so consumers never sum floats.
type pricedLine struct {
	ID            string  `json:"id"`
	Account       string  `json:"account"`
	Currency      string  `json:"currency"`
	Items         int     `json:"items"`
	SubtotalCents int64   `json:"subtotal_cents"`
	TaxRate       float64 `json:"tax_rate"`
	TaxCents      int64   `json:"tax_cents"`
	TotalCents    int64   `json:"total_cents"`
}

func parseTransaction(body []byte) (transaction, error) {
	var tx transaction
	if err := json.Unmarshal(body, &tx); err != nil {
		return tx, fmt.Errorf("billing: malformed transaction JSON: %w", err)
	}
	var missing []string
	if tx.ID == "" {
		missing = append(missing, "id")
	}
	if tx.Account == "" {
		missing = append(missing, "account")
	}
	if tx.Currency == "" {
		missing = append(missing, "currency")
	}
	if len(tx.Items) == 0 && tx.Amount == 0 {
		missing = append(missing, "items or amount")
	}
	if len(missing) > 0 {
		return tx, fmt.Errorf("billing: transaction %q lacks %s", tx.ID, strings.Join(missing, ", "))
	}
	if tx.Amount < 0 {
		return tx, fmt.Errorf("billing: transaction %q: negative amount %v", tx.ID, tx.Amount)
	}
	for i, it := range tx.Items {
		if it.Quantity <= 0 || it.UnitPrice < 0 {
			return tx, fmt.Errorf("billing: transaction %q item %d (%q): quantity %d, unit_price %v", tx.ID, i, it.SKU, it.Quantity, it.UnitPrice)
		}
	}
	return tx, nil
}

func cents(v float64) int64 { return int64(math.Round(v * 100)) }

// price totals the line items (or takes amount when there are none) and adds tax.
func price(tx transaction, rate float64) pricedLine {
	var sub int64
	for _, it := range tx.Items {
		sub += int64(it.Quantity) * cents(it.UnitPrice)
	}
	if len(tx.Items) == 0 {
		sub = cents(tx.Amount)
	}
	tax := int64(math.Round(float64(sub) * rate))
	return pricedLine{
		ID: tx.ID, Account: tx.Account, Currency: tx.Currency, Items: len(tx.Items),
		SubtotalCents: sub, TaxRate: rate, TaxCents: tax, TotalCents: sub + tax,
	}
}

func (p pricedLine) marshal() ([]byte, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("billing: encode priced line %q: %w", p.ID, err)
	}
	return b, nil
}

func parseRate(v string) (float64, error) {
	r, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || r < 0 || r > 1 || math.IsNaN(r) {
		return 0, fmt.Errorf("billing: config tax_rate %q is not a rate between 0 and 1", v)
	}
	return r, nil
}

var errSelfTestTotal = errors.New("billing: self test priced the known transaction wrongly")

func errSelfTest(got int64) error {
	return fmt.Errorf("%w: total_cents %d, want 330", errSelfTestTotal, got)
}
