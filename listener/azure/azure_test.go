package azure_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener/azure"
	"github.com/wqhost/wqhost/listener/azure/azuritetest"
	"github.com/wqhost/wqhost/listener/queue"
	"github.com/wqhost/wqhost/listener/queuetest"
)

func TestConformance(t *testing.T) {
	s := server(t)
	t.Logf("skipped through -test.skip=%s (see conformanceSkip for why Azure cannot pass them)", conformanceSkip)
	t.Log("time-dependent cases are skipped by the suite (Azurite's clock cannot be advanced); TestLeaseTiming covers them with real short timeouts")
	// Base64 only: the suite's binary bodies cannot travel under the text encoding, which
	// TestEncodingRoundTrip and TestInteropWithJSClient cover.
	queuetest.Run(t, azureSuite(s))
}

// TestConformanceSharded runs the contract on sharded.Queues over Azure queues.
func TestConformanceSharded(t *testing.T) {
	queuetest.Run(t, queuetest.Sharded(azureSuite(server(t)), 2))
}

// azureSuite is the Azure backend on Azurite; Reopen opens a new backend on the same
// account, as a restarted host would.
func azureSuite(s *azuritetest.Server) queuetest.Suite {
	return queuetest.Suite{
		Name: "azure",
		New: func(t *testing.T) (queue.Backend, func(time.Duration)) {
			deleteAllQueues(t, s)
			t.Cleanup(func() { deleteAllQueues(t, s) })
			return open(t, s, azure.EncodingBase64), nil
		},
		Reopen: func(t *testing.T, b queue.Backend) queue.Backend {
			b.Close()
			return open(t, s, azure.EncodingBase64)
		},
	}
}

// TestLeaseTiming covers the conformance suite's timed cases with real 1-2 s timeouts.
func TestLeaseTiming(t *testing.T) {
	s := server(t)
	ctx := context.Background()
	b := open(t, s, azure.EncodingBase64)
	q := openQueue(t, b, "lease-timing")

	id, err := q.Send(ctx, []byte("x"), queue.SendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m1 := receiveN(t, q, 1, time.Second)[0]
	if ms := receiveN(t, q, 0, time.Second); len(ms) != 0 {
		t.Fatalf("leased message delivered again at once")
	}
	time.Sleep(1500 * time.Millisecond)
	m2 := receiveN(t, q, 1, 2*time.Second)[0]
	if m2.ID != id || m2.DequeueCount != 2 || m2.LeaseToken == m1.LeaseToken {
		t.Fatalf("redelivery: id %s count %d token changed %v; want %s, 2, true", m2.ID, m2.DequeueCount, m2.LeaseToken != m1.LeaseToken, id)
	}
	if err := q.Delete(ctx, m1); !errors.Is(err, queue.ErrLeaseLost) {
		t.Fatalf("Delete with the expired receipt: %v, want ErrLeaseLost", err)
	}
	stale := *m1
	if err := q.UpdateVisibility(ctx, &stale, 0); !errors.Is(err, queue.ErrLeaseLost) {
		t.Fatalf("UpdateVisibility with the expired receipt: %v, want ErrLeaseLost", err)
	}
	// Renewal: keep extending a 2 s lease past its original expiry.
	for i := 0; i < 2; i++ {
		time.Sleep(time.Second)
		if err := q.UpdateVisibility(ctx, m2, 2*time.Second); err != nil {
			t.Fatalf("renewal %d: %v", i, err)
		}
		if ms := receiveN(t, q, 0, time.Second); len(ms) != 0 {
			t.Fatalf("renewed message delivered to another receiver")
		}
	}
	if !m2.VisibleAt.After(time.Now()) {
		t.Fatalf("VisibleAt %v after renewal is not in the future", m2.VisibleAt)
	}
	if err := q.Delete(ctx, m2); err != nil {
		t.Fatalf("Delete with the renewed receipt: %v", err)
	}

	// A delayed send stays invisible for its delay, then arrives with count 1.
	if _, err := q.Send(ctx, []byte("later"), queue.SendOptions{Delay: time.Second}); err != nil {
		t.Fatal(err)
	}
	if ms := receiveN(t, q, 0, time.Second); len(ms) != 0 {
		t.Fatalf("delayed message visible at once")
	}
	if d, err := q.Depth(ctx); err != nil || d != 1 {
		t.Fatalf("Depth = %d, %v with one delayed message; want 1", d, err)
	}
	time.Sleep(1500 * time.Millisecond)
	m := receiveN(t, q, 1, time.Minute)[0]
	if string(m.Body) != "later" || m.DequeueCount != 1 {
		t.Fatalf("delayed message %q count %d", m.Body, m.DequeueCount)
	}
}

// receiveN receives once and checks the count (want 0 allowed).
func receiveN(t *testing.T, q queue.Queue, want int, vis time.Duration) []*queue.Message {
	t.Helper()
	ms, err := q.Receive(context.Background(), queue.MaxBatch, vis)
	if err != nil {
		t.Fatalf("Receive from %s: %v", q.Name(), err)
	}
	if len(ms) != want {
		t.Fatalf("Receive from %s returned %d messages, want %d", q.Name(), len(ms), want)
	}
	return ms
}

func TestEncodingRoundTrip(t *testing.T) {
	s := server(t)
	ctx := context.Background()
	bodies := []struct {
		name   string
		body   []byte
		binary bool
	}{
		{"empty", []byte{}, false},
		{"ascii", []byte("hello, queue"), false},
		{"xml-special", []byte(`<order id="1">&amp; 'quoted'</order>`), false},
		{"crlf-tab", []byte("line1\r\nline2\n\tend\r"), false},
		{"unicode", []byte("héllo ✓ 日本 🚀"), false},
		{"json", []byte(`{"order":42,"items":["a","b"]}`), false},
		{"binary", []byte{0, 1, 2, 0xff, 0xfe, 0x80, '\n'}, true},
		{"max-base64", bytes.Repeat([]byte{0xAB}, 48<<10), true},
	}
	for _, enc := range []azure.Encoding{azure.EncodingBase64, azure.EncodingText} {
		b := open(t, s, enc)
		for i, tc := range bodies {
			t.Run(string(enc)+"/"+tc.name, func(t *testing.T) {
				name := fmt.Sprintf("enc-%s-%d", enc, i)
				q := openQueue(t, b, name)
				_, err := q.Send(ctx, tc.body, queue.SendOptions{})
				if enc == azure.EncodingText && tc.binary {
					if err == nil || !strings.Contains(err.Error(), "Encoding") {
						t.Fatalf("Send of a binary body under text encoding: %v, want an error naming the encoding", err)
					}
					return
				}
				if err != nil {
					t.Fatalf("Send: %v", err)
				}
				// The stored text is what other clients see: base64 of the body, or the body.
				peek, err := raw(t, s, name).PeekMessage(ctx, nil)
				if err != nil || len(peek.Messages) != 1 {
					t.Fatalf("peek: %v", err)
				}
				want := string(tc.body)
				if enc == azure.EncodingBase64 {
					want = base64.StdEncoding.EncodeToString(tc.body)
				}
				if got := *peek.Messages[0].MessageText; got != want {
					t.Fatalf("stored text %.60q, want %.60q", got, want)
				}
				m := receiveN(t, q, 1, time.Minute)[0]
				if !bytes.Equal(m.Body, tc.body) || len(m.Attributes) != 0 {
					t.Fatalf("received body %.60q attrs %v, want %.60q and none", m.Body, m.Attributes, tc.body)
				}
				// UpdateMessage re-sends the text: it must come back unchanged.
				if err := q.UpdateVisibility(ctx, m, 0); err != nil {
					t.Fatalf("release: %v", err)
				}
				m = receiveN(t, q, 1, time.Minute)[0]
				if !bytes.Equal(m.Body, tc.body) || m.DequeueCount != 2 {
					t.Fatalf("after release: body %.60q count %d", m.Body, m.DequeueCount)
				}
			})
		}
	}
}

func TestSendOverLimit(t *testing.T) {
	s := server(t)
	for _, tc := range []struct {
		enc  azure.Encoding
		size int
	}{
		{azure.EncodingBase64, 48<<10 + 1},
		{azure.EncodingText, 64<<10 + 1},
	} {
		t.Run(string(tc.enc), func(t *testing.T) {
			b := open(t, s, tc.enc)
			if b.MaxBodySize() != tc.size-1 {
				t.Fatalf("MaxBodySize = %d, want %d", b.MaxBodySize(), tc.size-1)
			}
			q := openQueue(t, b, "over-limit")
			before := q.Stats().Send
			_, err := q.Send(context.Background(), bytes.Repeat([]byte("a"), tc.size), queue.SendOptions{})
			if err == nil || !strings.Contains(err.Error(), "65536-byte limit") || !strings.Contains(err.Error(), "over-limit") {
				t.Fatalf("Send over the limit: %v, want an error naming the queue and the 64 KiB limit", err)
			}
			if q.Stats().Send != before {
				t.Fatal("an over-limit Send reached storage")
			}
		})
	}
}

func TestUndecodableGoesToPoison(t *testing.T) {
	s := server(t)
	ctx := context.Background()
	b := open(t, s, azure.EncodingBase64)
	const text = "not base64: {written by a text producer}"
	id := func() string {
		r, err := raw(t, s, "undecodable").EnqueueMessage(ctx, text, nil)
		if err != nil {
			t.Fatal(err)
		}
		return *r.Messages[0].MessageID
	}()
	good, err := openQueue(t, b, "undecodable").Send(ctx, []byte("fine"), queue.SendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q := openQueue(t, b, "undecodable")
	ms := receiveN(t, q, 1, time.Minute)
	if ms[0].ID != good {
		t.Fatalf("Receive handed over %s, want only the decodable %s", ms[0].ID, good)
	}
	if got := q.Stats().Undecodable; got != 1 {
		t.Fatalf("Stats.Undecodable = %d, want 1", got)
	}
	if d, err := q.Depth(ctx); err != nil || d != 1 {
		t.Fatalf("source Depth = %d, %v; want 1 (the undecodable one deleted)", d, err)
	}
	pq := openQueue(t, b, "undecodable-poison")
	pm := receiveN(t, pq, 1, time.Minute)[0]
	if string(pm.Body) != text {
		t.Fatalf("poison body %q, want the original text %q", pm.Body, text)
	}
	checkDeadLetterAttrs(t, pm.Attributes, map[string]string{
		queue.AttrOriginalID:    id,
		queue.AttrOriginalQueue: "undecodable",
		queue.AttrDequeueCount:  "1",
	}, "undecodable base64: ")
}

func checkDeadLetterAttrs(t *testing.T, got, want map[string]string, reasonPrefix string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("attribute %s = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
	if !strings.HasPrefix(got[queue.AttrReason], reasonPrefix) {
		t.Errorf("reason %q, want prefix %q", got[queue.AttrReason], reasonPrefix)
	}
	at, err := time.Parse(time.RFC3339Nano, got[queue.AttrDeadLetteredAt])
	if err != nil || time.Since(at) > time.Minute || time.Since(at) < -time.Minute {
		t.Errorf("dead_lettered_at %q: %v, want a recent RFC 3339 time", got[queue.AttrDeadLetteredAt], err)
	}
}

func TestPoisonEnvelope(t *testing.T) {
	s := server(t)
	ctx := context.Background()
	attrs := map[string]string{
		queue.AttrReason:        "handler failed: \"boom\"\n<xml & co>",
		queue.AttrOriginalID:    "5f0c-id",
		queue.AttrDequeueCount:  "5",
		queue.AttrOriginalQueue: "orders",
	}
	for _, tc := range []struct {
		name      string
		enc       azure.Encoding
		body      []byte
		poisonTTL time.Duration
	}{
		{"base64-text-body", azure.EncodingBase64, []byte(`{"order":1}`), 0},
		{"base64-binary-body", azure.EncodingBase64, []byte{0, 0xff, 1}, 0},
		{"text", azure.EncodingText, []byte("plain"), 0},
		{"ttl", azure.EncodingBase64, []byte("x"), time.Hour},
		// Near the limit a base64-wrapped envelope would not fit: stored as raw JSON.
		{"large", azure.EncodingBase64, bytes.Repeat([]byte("z"), 48<<10), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := open(t, s, tc.enc, func(o *azure.Options) { o.PoisonTTL = tc.poisonTTL })
			name := "env-" + tc.name + "-poison"
			q := openQueue(t, b, name)
			if _, err := q.Send(ctx, tc.body, queue.SendOptions{Attributes: attrs}); err != nil {
				t.Fatalf("Send: %v", err)
			}
			peek, err := raw(t, s, name).PeekMessage(ctx, nil)
			if err != nil || len(peek.Messages) != 1 {
				t.Fatalf("peek: %v", err)
			}
			pm := peek.Messages[0]
			// Other clients see JSON carrying the attributes (base64-wrapped when it fits).
			text := *pm.MessageText
			if tc.enc == azure.EncodingBase64 && !strings.HasPrefix(text, "{") {
				dec, err := base64.StdEncoding.DecodeString(text)
				if err != nil {
					t.Fatalf("stored text is neither JSON nor base64: %v", err)
				}
				text = string(dec)
			}
			if !strings.HasPrefix(text, `{"wqhost.envelope":1,"attributes":{`) || !strings.Contains(text, "5f0c-id") {
				t.Fatalf("stored envelope %.120q", text)
			}
			exp := *pm.ExpirationTime
			if tc.poisonTTL == 0 && exp.Before(time.Now().AddDate(1000, 0, 0)) {
				t.Fatalf("expiration %v, want never (Azure reports 9999-12-31)", exp)
			}
			if want := time.Now().Add(tc.poisonTTL); tc.poisonTTL > 0 && (exp.Sub(want) > time.Minute || want.Sub(exp) > time.Minute) {
				t.Fatalf("expiration %v, want about %v (PoisonTTL)", exp, want)
			}
			m := receiveN(t, q, 1, time.Minute)[0]
			if !bytes.Equal(m.Body, tc.body) {
				t.Fatalf("body %.60q, want %.60q", m.Body, tc.body)
			}
			if fmt.Sprint(m.Attributes) != fmt.Sprint(attrs) {
				t.Fatalf("attributes %v, want %v", m.Attributes, attrs)
			}
			// Renewal re-sends the envelope; the attributes must survive it.
			if err := q.UpdateVisibility(ctx, m, 0); err != nil {
				t.Fatal(err)
			}
			m = receiveN(t, q, 1, time.Minute)[0]
			if !bytes.Equal(m.Body, tc.body) || fmt.Sprint(m.Attributes) != fmt.Sprint(attrs) {
				t.Fatalf("after update: body %.60q attrs %v", m.Body, m.Attributes)
			}
		})
	}
}

func TestTransactionsCounted(t *testing.T) {
	s := server(t)
	ctx := context.Background()
	b := open(t, s, azure.EncodingBase64)
	q := openQueue(t, b, "counted") // CreateQueues: nothing happens until first use
	if got := q.Stats(); got != (azure.Stats{}) {
		t.Fatalf("Stats after Open = %+v, want zero", got)
	}
	// First use of a missing queue: the send fails (404), the queue is created, the send retried.
	if _, err := q.Send(ctx, []byte("a"), queue.SendOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, err := q.Send(ctx, []byte("b"), queue.SendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ms := receiveN(t, q, 3, time.Minute)
	if err := q.UpdateVisibility(ctx, ms[0], time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if err := q.Delete(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Delete(ctx, ms[0]); !errors.Is(err, queue.ErrLeaseLost) {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := q.Depth(ctx); err != nil {
		t.Fatal(err)
	}
	want := azure.Stats{Send: 4, Create: 1, Receive: 1, Update: 1, Delete: 4, Properties: 1}
	if got := q.Stats(); got != want {
		t.Fatalf("Stats = %+v, want %+v", got, want)
	}
	if got := want.Transactions(); got != 12 {
		t.Fatalf("Transactions = %d, want 12", got)
	}
	if got := b.Stats()["counted"]; got != want {
		t.Fatalf("Backend.Stats[counted] = %+v, want %+v", got, want)
	}
}

func TestOpenWithoutCreateQueues(t *testing.T) {
	s := server(t)
	ctx := context.Background()
	b := open(t, s, azure.EncodingBase64, func(o *azure.Options) { o.CreateQueues = false })
	_, err := b.Queue(ctx, "never-created")
	if !errors.Is(err, queue.ErrNotFound) || !strings.Contains(err.Error(), "never-created") || !strings.Contains(err.Error(), "CreateQueues") {
		t.Fatalf("Open of a missing queue: %v, want ErrNotFound naming the queue and Options.CreateQueues", err)
	}
	raw(t, s, "created-before")
	if _, err := b.Queue(ctx, "created-before"); err != nil {
		t.Fatalf("Open of an existing queue: %v", err)
	}
	if _, err := b.Queue(ctx, "Bad_Name"); err == nil || !strings.Contains(err.Error(), "Bad_Name") {
		t.Fatalf("Open with an invalid name: %v", err)
	}
}

func TestOptionsErrors(t *testing.T) {
	const key = "c2VjcmV0LWtleS1ub3QtdG8tbGVhaw==" // base64("secret-key-not-to-leak")
	cases := []struct {
		name    string
		opts    azure.Options
		want    string
		secrets []string
	}{
		{"none", azure.Options{}, "no credentials", nil},
		{"two", azure.Options{ConnectionString: "UseDevelopmentStorage=true", SASURL: "https://a.queue.core.windows.net/?sig=x"}, "Options.ConnectionString, Options.SASURL", []string{"sig=x"}},
		{"key-without-name", azure.Options{AccountKey: key}, "Options.AccountName is required", []string{key}},
		{"name-without-key", azure.Options{AccountName: "acct"}, "Options.AccountKey is required", nil},
		{"bad-key", azure.Options{AccountName: "acct", AccountKey: "not*base64*secret"}, "Options.AccountKey", []string{"not*base64*secret"}},
		{"bad-service-url", azure.Options{AccountName: "acct", AccountKey: key, ServiceURL: "ftp://x"}, "Options.ServiceURL", []string{key}},
		{"default-without-url", azure.Options{DefaultCredential: true}, "Options.ServiceURL is required", nil},
		{"sas-without-sig", azure.Options{SASURL: "https://a.queue.core.windows.net/?sv=2020"}, "no sig=", nil},
		{"sas-not-url", azure.Options{SASURL: "::secretsig"}, "Options.SASURL", []string{"secretsig"}},
		{"conn-malformed", azure.Options{ConnectionString: "AccountName=a;AccountKey" + key}, "Options.ConnectionString", []string{key}},
		{"conn-no-key", azure.Options{ConnectionString: "AccountName=a"}, "Options.ConnectionString", nil},
		{"conn-bad-key", azure.Options{ConnectionString: "AccountName=a;AccountKey=%%" + key}, "Options.ConnectionString AccountKey", []string{key}},
		{"encoding", azure.Options{ConnectionString: "UseDevelopmentStorage=true", Encoding: "utf16"}, `Options.Encoding "utf16"`, nil},
		{"poison-ttl", azure.Options{ConnectionString: "UseDevelopmentStorage=true", PoisonTTL: -time.Second}, "Options.PoisonTTL", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := azure.Open(context.Background(), tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open: %v, want an error containing %q", err, tc.want)
			}
			for _, sec := range tc.secrets {
				if strings.Contains(err.Error(), sec) {
					t.Fatalf("error %q contains the secret %q", err, sec)
				}
			}
		})
	}
	for _, cs := range []string{"UseDevelopmentStorage=true", "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=" + key + ";EndpointSuffix=core.windows.net"} {
		if _, err := azure.Open(context.Background(), azure.Options{ConnectionString: cs}); err != nil {
			t.Errorf("Open(valid connection string): %v", err)
		}
	}
}

// TestSecretsNotInErrors checks runtime errors: a wrong key answered 403, and a SAS URL
// whose requests cannot connect (net/http quotes the whole URL, signature included).
func TestSecretsNotInErrors(t *testing.T) {
	s := server(t)
	ctx := context.Background()
	wrongKey := base64.StdEncoding.EncodeToString([]byte("this-is-the-wrong-account-key-0123456789"))
	b, err := azure.Open(ctx, azure.Options{AccountName: azuritetest.AccountName, AccountKey: wrongKey,
		ServiceURL: s.ServiceURL(), Retry: fastRetry})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_, err = b.Queue(ctx, "secret-check")
	var ae *azure.Error
	if !errors.As(err, &ae) || ae.StatusCode != 403 || azure.IsTransient(err) {
		t.Fatalf("Open with a wrong key: %v, want a non-transient 403 *azure.Error", err)
	}
	t.Logf("wrong-key error: %v", err)
	if strings.Contains(err.Error(), wrongKey) || !strings.Contains(err.Error(), "credentials") {
		t.Fatalf("error %q leaks the key or does not point at the credentials", err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	const sig = "c2VjcmV0U0FTc2lnbmF0dXJl%2B%2Fend"
	sb, err := azure.Open(ctx, azure.Options{SASURL: "http://" + dead + "/devstoreaccount1?sv=2020-02-10&ss=q&srt=sco&sp=rwdlacup&se=2099-01-01T00:00:00Z&sig=" + sig,
		CreateQueues: true, Retry: azure.RetryOptions{MaxRetries: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	q, err := sb.Queue(ctx, "secret-check")
	if err != nil {
		t.Fatal(err)
	}
	_, err = q.Receive(ctx, 1, time.Second)
	if err == nil || !azure.IsTransient(err) {
		t.Fatalf("Receive from a dead endpoint: %v, want a transient error", err)
	}
	t.Logf("SAS error: %v", err)
	for _, leak := range []string{sig, "c2VjcmV0U0FTc2lnbmF0dXJl"} {
		if strings.Contains(err.Error(), leak) {
			t.Fatalf("error %q leaks the SAS signature", err)
		}
	}
}

// TestOutageAndRestart stops Azurite under a backend: calls fail with a transient error
// after the retry policy's attempts, and work again with nothing lost once it is back.
func TestOutageAndRestart(t *testing.T) {
	server(t) // skip early when Azurite is unavailable
	s := azuritetest.Start(t)
	ctx := context.Background()
	b := open(t, s, azure.EncodingBase64)
	q := openQueue(t, b, "outage")
	id, err := q.Send(ctx, []byte("survives"), queue.SendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	before := q.Stats()
	_, err = q.Receive(ctx, 32, time.Minute)
	if !azure.IsTransient(err) || !errors.Is(err, azure.ErrUnavailable) || !errors.Is(err, queue.ErrUnavailable) {
		t.Fatalf("Receive during the outage: %v, want a transient ErrUnavailable (queue.ErrUnavailable too)", err)
	}
	after := q.Stats()
	if got := after.Unanswered - before.Unanswered; got != 3 {
		t.Fatalf("%d unanswered attempts, want 3 (1 + MaxRetries 2)", got)
	}
	if after.Transactions() != before.Transactions() {
		t.Fatalf("transactions counted during the outage: %+v -> %+v", before, after)
	}
	// Opening a queue while storage is down (without create_queues: one properties
	// request) is an error a host's start waits out.
	nb := open(t, s, azure.EncodingBase64, func(o *azure.Options) { o.CreateQueues = false })
	if _, err := nb.Open(ctx, "outage"); !errors.Is(err, queue.ErrUnavailable) {
		t.Fatalf("Open during the outage: %v, want queue.ErrUnavailable", err)
	}
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	ms := receiveN(t, q, 1, time.Minute)
	if ms[0].ID != id || string(ms[0].Body) != "survives" {
		t.Fatalf("after restart got %s %q, want %s", ms[0].ID, ms[0].Body, id)
	}
}

// loseFirstAnswer forwards every request but, for the first one matching method, drops
// storage's answer and reports a reset connection: the request took effect, the client
// cannot know.
type loseFirstAnswer struct {
	method string
	lost   atomic.Bool
}

func (l *loseFirstAnswer) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && r.Method == l.method && l.lost.CompareAndSwap(false, true) {
		resp.Body.Close()
		return nil, fmt.Errorf("read tcp: %w", syscall.ECONNRESET)
	}
	return resp, err
}

// TestDeleteRetriedAfterLostAnswer: the first delete attempt deletes the message but its
// answer is lost; the retry finds the message gone. That is a successful delete, not a lost
// lease (which the listener would count as unprocessed).
func TestDeleteRetriedAfterLostAnswer(t *testing.T) {
	s := server(t)
	ctx := context.Background()
	rt := &loseFirstAnswer{method: http.MethodDelete}
	b := open(t, s, azure.EncodingBase64, func(o *azure.Options) { o.HTTPClient = &http.Client{Transport: rt} })
	q := openQueue(t, b, "lost-answer")
	if _, err := q.Send(ctx, []byte("x"), queue.SendOptions{}); err != nil {
		t.Fatal(err)
	}
	m := receiveN(t, q, 1, time.Minute)[0]
	if err := q.Delete(ctx, m); err != nil {
		t.Fatalf("Delete whose first answer was lost: %v, want success", err)
	}
	if !rt.lost.Load() {
		t.Fatal("the fault was not injected")
	}
	if st := q.Stats(); st.Delete != 1 || st.Unanswered != 1 {
		t.Fatalf("stats %+v, want 1 answered delete and 1 unanswered attempt", st)
	}
	if d, err := q.Depth(ctx); err != nil || d != 0 {
		t.Fatalf("Depth = %d, %v; want 0", d, err)
	}
	// Without an unanswered attempt, deleting a gone message is still a lost lease.
	if err := q.Delete(ctx, m); !errors.Is(err, queue.ErrLeaseLost) {
		t.Fatalf("second Delete: %v, want ErrLeaseLost", err)
	}
}
