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
//	max_output_bytes  the largest array to emit, in bytes; an object too large for an
//	                  array of its own is rejected. Default: the host's limit on an
//	                  output (wqhost.MaxOutputBytes: the tenant's max_output_bytes, or
//	                  less where the queue backend carries less, e.g. 49152 on Azure under
//	                  base64), or 49152 where the host does not tell; a larger value is
//	                  cut to the host's limit, since emit would refuse it
package main

import (
	"errors"
	"strconv"

	wqhost "github.com/wqhost/wqhost/sdk/go"
)

// fallbackMaxOutput is the array size limit on a host that does not tell its own: 49152
// bytes fit a message on every backend (Azure's 64 KiB of text after base64).
const fallbackMaxOutput = 49152

func init() { wqhost.HandleBatch(handle) }

// settings are the binding's config, read once per instance (config is fixed for an
// instance's life, docs/abi.md).
type settings struct {
	max int
	err error // a bad config retries every batch with this reason
}

var cfg *settings

func loadSettings() *settings {
	host := wqhost.MaxOutputBytes() // 0: the host does not tell
	s := &settings{max: host}
	if host == 0 {
		s.max = fallbackMaxOutput
	}
	if v, ok := wqhost.Config("max_output_bytes"); ok && v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			s.err = errors.New("bulk-sink: config max_output_bytes " + strconv.Quote(v) + " is not a positive byte count")
			return s
		}
		s.max = n
		if host > 0 {
			s.max = min(n, host)
		}
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
