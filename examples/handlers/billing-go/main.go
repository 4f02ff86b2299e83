// Command billing-go is the billing scenario of the seeds as a wqhost/v1 handler: it reads a
// customer transaction as JSON, prices it with the binding's tax rate and emits one priced
// line as JSON to the binding's output queue. Malformed transactions are rejected (poison
// queue) with a reason naming the problem; they would fail the same way on every retry.
package main

import (
	wqhost "github.com/wqhost/wqhost/sdk/go"
)

func init() {
	wqhost.Handle(handle)
	wqhost.SelfTest(selfTest)
}

func handle(m *wqhost.Message) wqhost.Result {
	rate, err := taxRate()
	if err != nil {
		// A bad config is the operator's problem, not the message's: retry, don't poison.
		return wqhost.Retry(0, err)
	}
	tx, err := parseTransaction(m.Body())
	if err != nil {
		return wqhost.Reject(err)
	}
	out, err := price(tx, rate).marshal()
	if err != nil {
		return wqhost.Reject(err)
	}
	if err := wqhost.Emit("", out); err != nil {
		return wqhost.Retry(0, err)
	}
	return wqhost.OK()
}

func taxRate() (float64, error) {
	v, ok := wqhost.Config("tax_rate")
	if !ok {
		return 0, nil
	}
	return parseRate(v)
}

// selfTest prices a known transaction so a broken build is refused before it takes traffic.
func selfTest() error {
	tx, err := parseTransaction([]byte(`{"id":"t","account":"a","currency":"EUR","items":[{"sku":"x","quantity":2,"unit_price":1.5}]}`))
	if err != nil {
		return err
	}
	if got := price(tx, 0.1); got.TotalCents != 330 {
		return errSelfTest(got.TotalCents)
	}
	return nil
}

// main is never called in a c-shared (reactor) build; the handler is registered in init.
func main() {}
