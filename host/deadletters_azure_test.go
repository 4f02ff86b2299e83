package host

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/listener/azure/azuritetest"
	"github.com/wqhost/wqhost/listener/queue"
)

// TestWalkDeadLettersPagesOnAzure, on Azurite (no cursor in the service: the listing leases
// and releases a batch at a time): --limit pages through the dead letters with the returned
// insertion-time cursor, each listed once and with its attributes intact; a body above ListBodyBytes is given by its size only; after each page every
// dead letter is receivable again (the listing released its leases); a cursor this path
// never gave is refused.
func TestWalkDeadLettersPagesOnAzure(t *testing.T) {
	az := azuritetest.Start(t)
	t.Setenv("WQHOST_TEST_AZURITE", az.ConnectionString())
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
data_dir: %s
admin: {addr: "off"}
backends:
  az: {type: azure, connection_string_env: WQHOST_TEST_AZURITE, create_queues: true}
tenants:
  default:
    bindings:
      b: {backend: az, queue: inbox, module: 'builtin:echo-go'}
`, t.TempDir())), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	dead, closer, err := OpenQueue(ctx, cfg, "default", "inbox-poison")
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	const n = 7
	for i := range n {
		body := []byte(fmt.Sprint(i))
		if i == 2 {
			body = bytes.Repeat([]byte{'x'}, 8<<10)
		}
		attrs := map[string]string{queue.AttrReason: fmt.Sprint("r", i), queue.AttrOriginalID: fmt.Sprint("o", i),
			queue.AttrDeadLetteredAt: time.Unix(1700000000, int64(n-i)*1000).UTC().Format(time.RFC3339Nano)} // listed newest first: not the receive order
		if i == 5 {
			delete(attrs, queue.AttrDeadLetteredAt) // a foreign producer's: no time
		}
		if _, err := dead.Send(ctx, body, queue.SendOptions{Attributes: attrs}); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]int{}
	after, pages := "", 0
	for {
		next, err := WalkDeadLetters(ctx, cfg, "default", "inbox", ListOptions{Limit: 3, After: after}, func(d DeadLetter) error {
			seen[d.Reason]++
			if d.Reason == "r2" && (d.Body != nil || d.BodyBytes != 8<<10) {
				t.Errorf("8 KiB dead letter: body of %d bytes given, body_bytes %d; want only its size", len(d.Body), d.BodyBytes)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if d, err := ListDeadLetters(ctx, cfg, "default", "inbox", 0); err != nil || len(d) != n {
			t.Fatalf("after page %d: %d dead letters receivable (%v), want all %d released", pages, len(d), err, n)
		}
		if next == "" || pages > 5 {
			break
		}
		after = next
	}
	if len(seen) != n || pages != 3 {
		t.Errorf("listed %d dead letters in %d pages (%v), want %d in 3", len(seen), pages, seen, n)
	}
	for r, c := range seen {
		if c != 1 {
			t.Errorf("dead letter %s listed %d times", r, c)
		}
	}
	if _, err := WalkDeadLetters(ctx, cfg, "default", "inbox", ListOptions{After: "12.34"}, func(DeadLetter) error { return nil }); err == nil {
		t.Error("a local-store cursor was accepted on Azure")
	}
}
