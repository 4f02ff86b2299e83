package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"sync/atomic"
	"unicode/utf8"
)

// nativeCaller is the floor: the same logic as a Go function, no sandbox.
type nativeCaller struct {
	fn    func(body []byte) ([]byte, error)
	total atomic.Int64
}

func openNative(l Logic) (*nativeCaller, error) {
	c := &nativeCaller{}
	switch l {
	case Noop:
		c.fn = func([]byte) ([]byte, error) { return nil, nil }
	case Vowels:
		c.fn = c.vowels
	case Billing:
		c.fn = billing
	default:
		return nil, fmt.Errorf("engine go, logic %q: %w", l, ErrUnsupported)
	}
	return c, nil
}

func (c *nativeCaller) Call(_ context.Context, body []byte) ([]byte, error) { return c.fn(body) }
func (c *nativeCaller) Close(context.Context) error                         { return nil }

const defaultVowels = "aeiouAEIOU"

// asciiVowels[c] is 1 for the ASCII characters of defaultVowels.
var asciiVowels = func() (t [utf8.RuneSelf]uint8) {
	for i := 0; i < len(defaultVowels); i++ {
		t[defaultVowels[i]] = 1
	}
	return t
}()

// vowels mirrors examples/handlers/count-vowels-go: a table lookup per ASCII byte, the set
// searched only for other runes (none of which is in defaultVowels). The running total is
// per caller here, as it is per instance in the guests.
func (c *nativeCaller) vowels(body []byte) ([]byte, error) {
	n := 0
	for i := 0; i < len(body); {
		if b := body[i]; b < utf8.RuneSelf {
			n += int(asciiVowels[b])
			i++
			continue
		}
		_, size := utf8.DecodeRune(body[i:])
		i += size
	}
	total := c.total.Add(int64(n))
	out := append(make([]byte, 0, 64), `{"count":`...)
	out = strconv.AppendInt(out, int64(n), 10)
	out = append(out, `,"total":`...)
	out = strconv.AppendInt(out, total, 10)
	out = append(out, `,"vowels":`...)
	out = strconv.AppendQuote(out, defaultVowels)
	return append(out, '}'), nil
}

type txItem struct {
	SKU       string  `json:"sku"`
	Quantity  int     `json:"quantity"`
	UnitPrice float64 `json:"unit_price"`
}

type transaction struct {
	ID       string   `json:"id"`
	Account  string   `json:"account"`
	Currency string   `json:"currency"`
	Amount   float64  `json:"amount"`
	Items    []txItem `json:"items"`
}

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

// BillingNative is the billing logic in plain Go (tax_rate 0.2); it returns an error wrapping
// ErrRejected for a transaction billing-go would reject.
func BillingNative(body []byte) ([]byte, error) { return billing(body) }

// billing mirrors examples/handlers/billing-go with tax_rate 0.2: decode, validate, price in
// cents, encode.
func billing(body []byte) ([]byte, error) {
	const rate = 0.2
	var tx transaction
	if err := json.Unmarshal(body, &tx); err != nil {
		return nil, fmt.Errorf("%w: malformed transaction JSON: %v", ErrRejected, err)
	}
	if tx.ID == "" || tx.Account == "" || tx.Currency == "" || len(tx.Items) == 0 && tx.Amount == 0 || tx.Amount < 0 {
		return nil, fmt.Errorf("%w: transaction %q incomplete", ErrRejected, tx.ID)
	}
	cents := func(v float64) int64 { return int64(math.Round(v * 100)) }
	var sub int64
	for _, it := range tx.Items {
		if it.Quantity <= 0 || it.UnitPrice < 0 {
			return nil, fmt.Errorf("%w: transaction %q: bad item %q", ErrRejected, tx.ID, it.SKU)
		}
		sub += int64(it.Quantity) * cents(it.UnitPrice)
	}
	if len(tx.Items) == 0 {
		sub = cents(tx.Amount)
	}
	tax := int64(math.Round(float64(sub) * rate))
	return json.Marshal(pricedLine{
		ID: tx.ID, Account: tx.Account, Currency: tx.Currency, Items: len(tx.Items),
		SubtotalCents: sub, TaxRate: rate, TaxCents: tax, TotalCents: sub + tax,
	})
}
