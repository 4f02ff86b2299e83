// Command webhook-delivery-go POSTs each message body to the URL in the binding's config and
// lets the queue do the retrying: a 2xx response completes the message; 408, 429 and 5xx
// retry it after the receiver's Retry-After (capped by max_retry_after) or, without one, the
// binding's back-off; any other status rejects it to the poison queue with the status and
// URL (without query) as the reason. Every delivery of one message carries the same
// Idempotency-Key (the message id), so a receiver can drop the duplicate of a retried
// delivery whose first answer was lost.
//
// Config (binding config:):
//
//	url              the webhook URL (required); it must match the binding's http.allow
//	credential       optional: a name from http.credentials the host adds (e.g. a signature
//	                 or bearer token the handler never sees)
//	content_type     default application/json
//	max_retry_after  cap on the receiver's Retry-After, a Go duration (default 10m)
package main

import (
	"errors"
	"time"

	wqhost "github.com/wqhost/wqhost/sdk/go"
	"github.com/wqhost/wqhost/sdk/go/http"
)

const defaultMaxRetryAfter = 10 * time.Minute

func init() { wqhost.Handle(deliver) }

func deliver(m *wqhost.Message) wqhost.Result {
	url, ok := wqhost.Config("url")
	if !ok || url == "" {
		return wqhost.Reject(errors.New("webhook-delivery: config url is not set"))
	}
	ct, ok := wqhost.Config("content_type")
	if !ok || ct == "" {
		ct = "application/json"
	}
	maxAfter := defaultMaxRetryAfter
	if v, ok := wqhost.Config("max_retry_after"); ok && v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return wqhost.Reject(errors.New("webhook-delivery: config max_retry_after " + v + " is not a duration"))
		}
		maxAfter = d
	}
	cred, _ := wqhost.Config("credential")
	resp, err := http.Post(url, m.Body(), &http.Options{
		Headers:    []string{"Content-Type: " + ct, "Idempotency-Key: " + m.ID()},
		Credential: cred,
		MaxBody:    1 << 10, // the answer is not used; keep little of it
	})
	if err == nil {
		err = resp.Check()
	}
	return http.ResultFor(err, maxAfter)
}

// main is never called in a c-shared (reactor) build; the handler is registered in init.
func main() {}
