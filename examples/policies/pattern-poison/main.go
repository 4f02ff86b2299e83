// Command pattern-poison is an external poison policy plugin for wqhost. A failure whose
// error text matches a regular expression is dead-lettered at once (it will never succeed,
// e.g. a schema error); any other failure is retried after a fixed delay until the binding's
// max dequeue count, then dead-lettered.
//
// Usage (as a wqhost policy plugin): pattern-poison -pattern 'invalid|schema' [-delay 30s]
// or the environment: POISON_PATTERN, POISON_RETRY_DELAY.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"regexp"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/outcome"
	"github.com/wqhost/wqhost/plugins/sdk"
)

// policy dead-letters failures matching pattern and retries the others.
type policy struct {
	pattern *regexp.Regexp
	delay   time.Duration
}

// Decide implements listener.PoisonPolicy.
func (p policy) Decide(_ context.Context, f listener.Failure) outcome.Outcome {
	o := f.Outcome
	msg := ""
	if o.Err != nil {
		msg = o.Err.Error()
	}
	switch {
	case o.Kind == outcome.KindReject:
		return outcome.DeadLetter("rejected by handler: " + msg)
	case p.pattern != nil && msg != "" && p.pattern.MatchString(msg):
		return outcome.DeadLetter(fmt.Sprintf("error matches %q: %s", p.pattern, msg))
	case f.Message != nil && f.MaxDequeueCount > 0 && f.Message.DequeueCount >= f.MaxDequeueCount:
		return outcome.DeadLetter(fmt.Sprintf("dequeued %d times (max %d): %s", f.Message.DequeueCount, f.MaxDequeueCount, msg))
	}
	d := p.delay
	if o.Kind == outcome.KindRetry && o.After > 0 {
		d = o.After
	}
	return outcome.Outcome{Kind: outcome.KindRetry, After: d}
}

func main() {
	pattern := flag.String("pattern", os.Getenv("POISON_PATTERN"), "regexp of error texts to dead-letter at once")
	delay := flag.Duration("delay", sdk.Duration(os.Getenv("POISON_RETRY_DELAY"), 30*time.Second), "retry delay of other failures")
	flag.Parse()
	p := policy{delay: *delay}
	if *pattern != "" {
		re, err := regexp.Compile(*pattern)
		if err != nil {
			// stderr reaches the host's log; exiting makes the host report the start failure.
			fmt.Fprintf(os.Stderr, "pattern-poison: -pattern %q: %v\n", *pattern, err)
			os.Exit(2)
		}
		p.pattern = re
	}
	sdk.Serve(sdk.Policies{Name: "pattern-poison", Poison: p})
}
