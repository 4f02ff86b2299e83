package azure_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"

	"github.com/wqhost/wqhost/listener/azure"
	"github.com/wqhost/wqhost/listener/azure/azuritetest"
)

// shared is the Azurite the tests that do not stop it share, started by the first of them
// (so fuzz workers, which run TestMain too, never start one); nil when it could not start
// (startErr says why and each test skips, or fails in CI, through azuritetest).
var (
	sharedOnce sync.Once
	shared     *azuritetest.Server
	startErr   error
)

// conformanceSkip skips the two conformance cases Azure itself cannot pass:
//   - RoundTripBodies/64KiB: the service caps (encoded) message text at 64 KiB, so 48 KiB of
//     body under base64; TestSendOverLimit checks the clear error instead.
//   - ReleaseReturnsToHead: Azure orders visible messages by their next-visible time, so a
//     message released with visibility 0 queues behind those already visible (Azurite does
//     the same); TestEncodingRoundTrip checks that a released message is receivable at once.
const conformanceSkip = `^TestConformance(Sharded)?$/^RoundTripBodies$/^64KiB$|^TestConformance(Sharded)?$/^ReleaseReturnsToHead$`

func TestMain(m *testing.M) {
	flag.Parse()
	// A -skip given on the command line (scripts/test.sh passes one for another package)
	// is kept: the conformance cases are added to it as alternatives.
	if f := flag.Lookup("test.skip"); f != nil {
		skip := conformanceSkip
		if cur := f.Value.String(); cur != "" {
			skip = cur + "|" + conformanceSkip
		}
		_ = f.Value.Set(skip)
	}
	code := m.Run()
	if shared != nil {
		if err := shared.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "azure tests: stop azurite: %v\n", err)
		}
	}
	os.Exit(code)
}

// server returns the shared Azurite, or skips (fails in CI) when it is unavailable.
func server(t testing.TB) *azuritetest.Server {
	t.Helper()
	sharedOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		shared, startErr = azuritetest.StartServer(ctx, azuritetest.Options{InMemory: true})
	})
	if shared == nil {
		azuritetest.SkipOrFail(t, startErr)
	}
	return shared
}

// quiet retries: tests that expect failures should not wait out production back-off.
var fastRetry = azure.RetryOptions{MaxRetries: 2, RetryDelay: 5 * time.Millisecond, MaxRetryDelay: 20 * time.Millisecond, TryTimeout: 10 * time.Second}

// open opens a backend on s with CreateQueues and the given encoding.
func open(t testing.TB, s *azuritetest.Server, enc azure.Encoding, mod ...func(*azure.Options)) *azure.Backend {
	t.Helper()
	o := azure.Options{ConnectionString: s.ConnectionString(), Encoding: enc, CreateQueues: true, Retry: fastRetry}
	for _, f := range mod {
		f(&o)
	}
	b, err := azure.Open(context.Background(), o)
	if err != nil {
		t.Fatalf("azure.Open: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func openQueue(t testing.TB, b *azure.Backend, name string) *azure.Queue {
	t.Helper()
	q, err := b.Queue(context.Background(), name)
	if err != nil {
		t.Fatalf("Queue(%q): %v", name, err)
	}
	return q
}

// raw is Microsoft's Go client on s without wqhost in between, to write and inspect message
// text exactly as stored.
func raw(t testing.TB, s *azuritetest.Server, name string) *azqueue.QueueClient {
	t.Helper()
	svc, err := azqueue.NewServiceClientFromConnectionString(s.ConnectionString(), nil)
	if err != nil {
		t.Fatalf("raw client: %v", err)
	}
	q := svc.NewQueueClient(name)
	if _, err := q.Create(context.Background(), nil); err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return q
}

// deleteAllQueues empties the account so every conformance case starts fresh.
func deleteAllQueues(t testing.TB, s *azuritetest.Server) {
	t.Helper()
	ctx := context.Background()
	svc, err := azqueue.NewServiceClientFromConnectionString(s.ConnectionString(), nil)
	if err != nil {
		t.Fatalf("raw client: %v", err)
	}
	pager := svc.NewListQueuesPager(nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatalf("list queues: %v", err)
		}
		for _, qi := range page.Queues {
			if _, err := svc.DeleteQueue(ctx, *qi.Name, nil); err != nil {
				t.Fatalf("delete queue %s: %v", *qi.Name, err)
			}
		}
	}
}
