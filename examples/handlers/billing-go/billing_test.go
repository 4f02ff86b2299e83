package main

import (
	"strings"
	"testing"
)

func TestPrice(t *testing.T) {
	tests := []struct {
		name string
		tx   transaction
		rate float64
		want pricedLine
	}{
		{"items", transaction{ID: "1", Items: []item{{"a", 3, 0.1}, {"b", 1, 19.99}}}, 0.25,
			pricedLine{ID: "1", Items: 2, SubtotalCents: 2029, TaxRate: 0.25, TaxCents: 507, TotalCents: 2536}},
		{"amount", transaction{ID: "2", Amount: 10}, 0, pricedLine{ID: "2", SubtotalCents: 1000, TotalCents: 1000}},
	}
	for _, tc := range tests {
		if got := price(tc.tx, tc.rate); got != tc.want {
			t.Errorf("%s: price = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestParseRate(t *testing.T) {
	for _, ok := range []string{"0", "0.2", " 1 "} {
		if _, err := parseRate(ok); err != nil {
			t.Errorf("parseRate(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "x", "-0.1", "1.5", "NaN"} {
		if _, err := parseRate(bad); err == nil || !strings.Contains(err.Error(), "tax_rate") {
			t.Errorf("parseRate(%q) = %v, want an error naming tax_rate", bad, err)
		}
	}
}

func TestSelfTestPasses(t *testing.T) {
	if err := selfTest(); err != nil {
		t.Fatal(err)
	}
}
