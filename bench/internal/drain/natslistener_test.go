package drain

import (
	"strings"
	"testing"
)

// TestNATSLine: the nats summary compares wqhost with a plain consumer in the same ack mode
// (DoubleAck) and in its default one (Ack), at the server's default durability, and says
// nothing when a row is missing.
func TestNATSLine(t *testing.T) {
	rows := []Result{
		{System: "jetstream", Durability: natsDurability(true), MsgPerSec: 5000},
		{System: "jetstream", Durability: natsDurability(false), MsgPerSec: 200000, CallsPerMsg: 1.004},
		{System: "wqhost-nats", Durability: natsDurability(false), MsgPerSec: 60000, CallsPerMsg: 1.033},
		{System: "jetstream-doubleack", Durability: natsDurability(false), MsgPerSec: 30000, CallsPerMsg: 1.004},
	}
	want := "nats drain msg/s: wqhost=60000 plain-same-ack=30000 plain-default=200000; wqhost/plain-same-ack=2.00× wqhost/plain-default=0.30×"
	if got := natsLine(rows); !strings.HasPrefix(got, want) {
		t.Errorf("line %q, want it to begin %q", got, want)
	}
	if got := Lines(Drains{Rows: rows}); !strings.HasPrefix(got[len(got)-1], "nats drain msg/s: ") {
		t.Errorf("Lines %q: want the nats line last", got)
	}
	if got := natsLine(rows[:3]); got != "" {
		t.Errorf("without the DoubleAck row: %q, want no line", got)
	}
}
