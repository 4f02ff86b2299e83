package outcome_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/wqhost/wqhost/listener/outcome"
)

// A handler written as a plain func returning an error says what becomes of the message
// through the error: nil is done, Retry asks for a delay, Reject dead-letters at once, and
// any other error is a failure the poison policy settles.
func ExampleOf() {
	down := errors.New("downstream unavailable")
	for _, err := range []error{
		nil,
		outcome.Retry(5*time.Second, down),
		outcome.Reject(errors.New("not JSON")),
		down,
	} {
		o := outcome.Of(err)
		fmt.Printf("%s after=%s reason=%q\n", o.Kind, o.After, o.Reason())
	}
	// Output:
	// done after=0s reason=""
	// retry after=5s reason="downstream unavailable"
	// reject after=0s reason="rejected: not JSON"
	// failed after=0s reason="downstream unavailable"
}
