package azure_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener/queue"

	"github.com/wqhost/wqhost/listener/azure"
)

// TestPoisonFormatRaw, on Azurite: with PoisonFormat raw a dead letter in <queue>-poison is
// the original body alone, encoded like any message (what an Azure Functions consumer of
// the poison queue expects), and its reason, dequeue count and original id go to the log;
// a queue that is not a poison queue keeps its attributes, and a binary body that
// EncodingText cannot carry falls back to the envelope. An unknown format is refused.
func TestPoisonFormatRaw(t *testing.T) {
	s := server(t)
	ctx := context.Background()
	attrs := map[string]string{
		queue.AttrReason:        "failed 5 times (max_dequeue_count 5): handler call: trapped",
		queue.AttrOriginalID:    "orig-42",
		queue.AttrDequeueCount:  "5",
		queue.AttrOriginalQueue: "orders",
	}
	for _, tc := range []struct {
		name     string
		enc      azure.Encoding
		body     []byte
		wantText string // the stored message text
	}{
		{"base64", azure.EncodingBase64, []byte(`{"order":1}`), base64.StdEncoding.EncodeToString([]byte(`{"order":1}`))},
		{"text", azure.EncodingText, []byte("plain order"), "plain order"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			b := open(t, s, tc.enc, func(o *azure.Options) {
				o.PoisonFormat = azure.PoisonRaw
				o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			})
			name := "raw-" + tc.name + "-poison"
			if _, err := openQueue(t, b, name).Send(ctx, tc.body, queue.SendOptions{Attributes: attrs}); err != nil {
				t.Fatal(err)
			}
			peek, err := raw(t, s, name).PeekMessage(ctx, nil)
			if err != nil || len(peek.Messages) != 1 {
				t.Fatalf("peek: %v", err)
			}
			if got := *peek.Messages[0].MessageText; got != tc.wantText {
				t.Errorf("stored text %q, want the raw body %q", got, tc.wantText)
			}
			ms, err := openQueue(t, b, name).Receive(ctx, 1, time.Minute)
			if err != nil || len(ms) != 1 || !bytes.Equal(ms[0].Body, tc.body) || len(ms[0].Attributes) != 0 {
				t.Fatalf("Receive: %v, %+v", err, ms)
			}
			for _, want := range []string{"dead letter stored as its raw body", "poison_queue=" + name, "original_id=orig-42", "dequeue_count=5", "handler call: trapped"} {
				if !strings.Contains(logs.String(), want) {
					t.Errorf("log lacks %q:\n%s", want, logs.String())
				}
			}
		})
	}
	t.Run("not a poison queue", func(t *testing.T) {
		b := open(t, s, azure.EncodingBase64, func(o *azure.Options) { o.PoisonFormat = azure.PoisonRaw })
		q := openQueue(t, b, "raw-plain")
		if _, err := q.Send(ctx, []byte("x"), queue.SendOptions{Attributes: map[string]string{"k": "v"}}); err != nil {
			t.Fatal(err)
		}
		ms, err := q.Receive(ctx, 1, time.Minute)
		if err != nil || len(ms) != 1 || ms[0].Attributes["k"] != "v" {
			t.Fatalf("attributes of an ordinary queue lost under PoisonRaw: %v %+v", err, ms)
		}
	})
	t.Run("binary body under text", func(t *testing.T) {
		b := open(t, s, azure.EncodingText, func(o *azure.Options) { o.PoisonFormat = azure.PoisonRaw })
		q := openQueue(t, b, "raw-bin-poison")
		if _, err := q.Send(ctx, []byte{0, 0xff}, queue.SendOptions{Attributes: attrs}); err != nil {
			t.Fatal(err)
		}
		ms, err := q.Receive(ctx, 1, time.Minute)
		if err != nil || len(ms) != 1 || !bytes.Equal(ms[0].Body, []byte{0, 0xff}) || ms[0].Attributes[queue.AttrOriginalID] != "orig-42" {
			t.Fatalf("binary dead letter under text: %v %+v", err, ms)
		}
	})
	if _, err := azure.Open(ctx, azure.Options{ConnectionString: s.ConnectionString(), PoisonFormat: "functions"}); err == nil || !strings.Contains(err.Error(), `Options.PoisonFormat "functions"`) {
		t.Errorf("unknown PoisonFormat: %v", err)
	}
}
