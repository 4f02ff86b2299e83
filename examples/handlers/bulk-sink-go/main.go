// Command bulk-sink-go is a batch handler (wqhost.HandleBatch): it writes the messages of a
// batch that are JSON objects as one JSON array, [{...},{...}], to the binding's output
// queue, for a consumer that loads rows in bulk. An array that would exceed max_output_bytes
// is split into several. A message whose body is not a JSON object is rejected (poison queue)
// with a reason naming its id; the others are done when the arrays are sent.
//
// The arrays are the call's outputs (wqhost.Emit, not BatchMessage.Emit), so they are sent
// only when the handler returns OK, and a failed emit retries every message not rejected.
// On a binding without batch: each call is a batch of one, giving an array of one.
//
// Config (binding config:):
//
//	max_output_bytes  the largest array to emit, in bytes (default 60000, under the
//	                  64 KiB a queue message may hold); an object too large for an array
//	                  of its own is rejected
package main

import (
	"errors"
	"strconv"

	wqhost "github.com/wqhost/wqhost/sdk/go"
)

const defaultMaxOutput = 60000

func init() { wqhost.HandleBatch(handle) }

// settings are the binding's config, read once per instance (config is fixed for an
// instance's life, docs/abi.md).
type settings struct {
	max int
	err error // a bad config retries every batch with this reason
}

var cfg *settings

func loadSettings() *settings {
	s := &settings{max: defaultMaxOutput}
	if v, ok := wqhost.Config("max_output_bytes"); ok && v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			s.err = errors.New("bulk-sink: config max_output_bytes " + strconv.Quote(v) + " is not a positive byte count")
			return s
		}
		s.max = n
	}
	return s
}

// out is the array being built, kept across calls so its buffer is reused.
var out packer

func handle(b *wqhost.Batch) wqhost.Result {
	if cfg == nil {
		cfg = loadSettings()
	}
	if cfg.err != nil {
		// The operator's problem, not the messages': retry them, don't poison them.
		return wqhost.Retry(0, cfg.err)
	}
	out.reset(cfg.max, emit)
	for m := range b.Messages() {
		obj, err := jsonObject(m.Body())
		if err == nil && !out.fits(obj) {
			err = errors.New("a JSON object of " + strconv.Itoa(len(obj)) + " bytes does not fit an array of max_output_bytes " + strconv.Itoa(cfg.max))
		}
		if err != nil {
			if verr := m.Reject(errors.New("bulk-sink: message " + m.ID() + ": " + err.Error())); verr != nil {
				// Without its reject the message would end OK and be lost: retry the batch.
				return wqhost.Retry(0, verr)
			}
			continue
		}
		if err := out.add(obj); err != nil {
			return wqhost.Retry(0, err)
		}
	}
	if err := out.flush(); err != nil {
		return wqhost.Retry(0, err)
	}
	return wqhost.OK()
}

func emit(array []byte) error { return wqhost.Emit("", array) }

// main is never called in a c-shared (reactor) build; the handler is registered in init.
func main() {}
