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

// settings are the binding's config, read once per instance: config is fixed for an
// instance's life (a config change builds new instances, docs/abi.md), and reading it per
// message was a fifth of this handler's own time.
type settings struct {
	url         string
	contentType string // the whole header line
	credential  string
	maxAfter    time.Duration
	err         error // a bad config rejects every message with this reason
}

var cfg *settings

func loadSettings() *settings {
	s := &settings{maxAfter: defaultMaxRetryAfter}
	url, ok := wqhost.Config("url")
	if !ok || url == "" {
		s.err = errors.New("webhook-delivery: config url is not set")
		return s
	}
	s.url = url
	ct, ok := wqhost.Config("content_type")
	if !ok || ct == "" {
		ct = "application/json"
	}
	s.contentType = "Content-Type: " + ct
	if v, ok := wqhost.Config("max_retry_after"); ok && v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			s.err = errors.New("webhook-delivery: config max_retry_after " + v + " is not a duration")
			return s
		}
		s.maxAfter = d
	}
	s.credential, _ = wqhost.Config("credential")
	return s
}

func deliver(m *wqhost.Message) wqhost.Result {
	if cfg == nil {
		cfg = loadSettings()
	}
	if cfg.err != nil {
		return wqhost.Reject(cfg.err)
	}
	resp, err := http.Post(cfg.url, m.Body(), &http.Options{
		Headers:    []string{cfg.contentType, "Idempotency-Key: " + m.ID()},
		Credential: cfg.credential,
		MaxBody:    1 << 10, // the answer is not used; keep little of it
	})
	if err == nil {
		err = resp.Check()
	}
	return http.ResultFor(err, cfg.maxAfter)
}

// main is never called in a c-shared (reactor) build; the handler is registered in init.
func main() {}
