package azure

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/wqhost/wqhost/listener/queue"
)

// TestMaxMessageBytesIsExact: a body of MaxMessageBytes encodes to message text within
// Azure's limit, and one byte more does not, under both encodings: the limit the host gives
// guests is the real one, not a guess with a margin.
func TestMaxMessageBytesIsExact(t *testing.T) {
	for _, tc := range []struct {
		enc  Encoding
		want int
	}{{EncodingBase64, 49152}, {EncodingText, 65536}} {
		q := &Queue{name: "jobs", b: &Backend{enc: tc.enc}}
		n := q.MaxMessageBytes()
		if n != tc.want {
			t.Errorf("%s: MaxMessageBytes %d, want %d", tc.enc, n, tc.want)
		}
		for _, size := range []int{n, n + 1} {
			text, err := encode(tc.enc, bytes.Repeat([]byte{'x'}, size), nil)
			if err != nil {
				t.Fatal(err)
			}
			if fits := len(text) <= maxMessageText; fits != (size == n) {
				t.Errorf("%s: a body of %d bytes encodes to %d characters (limit %d): fits=%v", tc.enc, size, len(text), maxMessageText, fits)
			}
		}
		if got := (&Backend{enc: tc.enc}).MaxBodySize(); got != n {
			t.Errorf("%s: Backend.MaxBodySize %d, Queue.MaxMessageBytes %d", tc.enc, got, n)
		}
	}
}

// TestSendRefusesWhatAzureCannotCarry: a body above what the encoding carries, or a binary
// body under the text encoding, is refused before any request with queue.ErrUnsendable (the
// caller's input, so the CLI exits 2 and the admin API answers 400 instead of 500), saying why.
func TestSendRefusesWhatAzureCannotCarry(t *testing.T) {
	for _, tc := range []struct {
		name string
		enc  Encoding
		body []byte
		want string
	}{
		{"base64 above 48 KiB", EncodingBase64, bytes.Repeat([]byte{'x'}, 49153), "message text of 65540 bytes (body 49153 bytes, base64) exceeds Azure's 65536-byte limit"},
		{"text above 64 KiB", EncodingText, bytes.Repeat([]byte{'x'}, 65537), "exceeds Azure's 65536-byte limit"},
		{"binary under text", EncodingText, []byte("a\x00b\xff"), `not valid for Encoding "text"`},
	} {
		// No client: a send that reached the network would panic, failing the test.
		q := &Queue{name: "jobs", b: &Backend{enc: tc.enc}}
		_, err := q.Send(context.Background(), tc.body, queue.SendOptions{})
		if !errors.Is(err, queue.ErrUnsendable) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Send = %v; want queue.ErrUnsendable saying %q", tc.name, err, tc.want)
		}
	}
}
