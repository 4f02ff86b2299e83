package host

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener/azure/azuritetest"
)

// lockedBuffer is a log sink safe for the host's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestIdleBudgetOnAzure, on Azurite: an azure backend's idle_calls_per_hour paces its
// bindings without push from one budget. With one call an hour, two idle bindings make
// their start receive and, between them, the budget's first grant (MinInterval after
// start), then nothing for the rest of the hour: on their own back-off (100ms..60s) they
// would poll several times a second at first. The start log states the bound for the two
// (a binding with push is not paced and not counted).
func TestIdleBudgetOnAzure(t *testing.T) {
	az := azuritetest.Start(t)
	t.Setenv("WQHOST_TEST_AZURITE", az.ConnectionString())
	guest := abs(t, "../runtime/testdata/guest/guest.wasm")
	b := func(name, queue, extra string) string {
		return fmt.Sprintf("      %s: {backend: az, queue: %s, module: %q%s}\n", name, queue, guest, extra)
	}
	cfg := hostConfig(t, "backends:\n  az: {type: azure, connection_string_env: WQHOST_TEST_AZURITE, create_queues: true, idle_calls_per_hour: 1}\n",
		"  default:\n    bindings:\n"+b("a", "in-a", "")+b("b", "in-b", "")+b("c", "in-c", ", push: true"))
	var logs lockedBuffer
	h, err := New(context.Background(), cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if want := "idle poll budget: every idle queue is polled at least every 4h0m0.1s"; !strings.Contains(logs.String(), want) ||
		!strings.Contains(logs.String(), "backend=az idle_calls_per_hour=1 bindings=2") {
		t.Errorf("start log lacks %q for backend az and its 2 bindings without push:\n%s", want, logs.String())
	}
	stop := run(t, h)
	t.Cleanup(func() { _ = stop() })
	receives := func() uint64 {
		return bindingStatus(t, h, "default", "a").QueueCalls.Receives + bindingStatus(t, h, "default", "b").QueueCalls.Receives
	}
	eventually(t, "the start receives and the first grant's", func() bool { return receives() >= 3 })
	time.Sleep(time.Second)
	if n := receives(); n != 3 {
		t.Errorf("two bindings sharing one idle call an hour made %d receives in their first second or so, want 3 (one each at start, one granted)", n)
	}
}
