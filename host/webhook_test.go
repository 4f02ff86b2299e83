package host

import (
	"context"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// receiver is a webhook endpoint that fails a deterministic 30% of deliveries with 503,
// answers 400 to bodies starting with "bad", and logs each message it accepted.
type receiver struct {
	mu       sync.Mutex
	attempts map[string]int // by Idempotency-Key
	accepted map[string]int
	unauth   int
	token    string
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	buf := make([]byte, 64)
	n, _ := r.Body.Read(buf)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if r.Header.Get("Authorization") != rc.token {
		rc.unauth++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	rc.attempts[key]++
	if strings.HasPrefix(string(buf[:n]), "bad") {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	h := fnv.New32a()
	fmt.Fprintf(h, "%s/%d", key, rc.attempts[key])
	if h.Sum32()%10 < 3 {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	rc.accepted[key]++
	w.WriteHeader(http.StatusNoContent)
}

// TestWebhookDeliveryEndToEnd runs webhook-delivery (Go, TinyGo and Rust) in the host on the local
// backend against a receiver that fails 30% of requests with 503: every good message is
// delivered exactly once after retries, every bad one is dead-lettered with the status in
// its reason, and the credential reaches the receiver without the handler seeing it.
func TestWebhookDeliveryEndToEnd(t *testing.T) {
	const token = "Bearer e2e-webhook-secret"
	t.Setenv("WQHOST_TEST_WEBHOOK_TOKEN", token)
	for _, mod := range []string{"webhook-delivery-go", "webhook-delivery-tinygo", "webhook-delivery-rust"} {
		t.Run(mod, func(t *testing.T) {
			rc := &receiver{attempts: map[string]int{}, accepted: map[string]int{}, token: token}
			srv := httptest.NewServer(rc)
			defer srv.Close()
			h, cfg := newHost(t, fmt.Sprintf(`
  acme:
    bindings:
      hooks:
        queue: hooks
        module: builtin:%s
        max_dequeue_count: 10
        backoff: {min: 5ms, max: 50ms}
        poison: {base_delay: 5ms, max_delay: 20ms}
        config:
          url: %s/hooks/in?sig=querysecret
          credential: receiver
        http:
          allow: ["http://127.0.0.1:*/hooks"]
          credentials:
            receiver: {header: Authorization, value_env: WQHOST_TEST_WEBHOOK_TOKEN, hosts: [127.0.0.1]}
`, mod, srv.URL))
			run(t, h)
			const good, bad = 60, 3
			var bodies []string
			for i := range good {
				bodies = append(bodies, fmt.Sprintf(`{"event":"paid","n":%d}`, i))
			}
			for i := range bad {
				bodies = append(bodies, fmt.Sprintf("bad %d", i))
			}
			send(t, h, "acme", "hooks", bodies...)
			eventually(t, "every message settled", func() bool {
				s := bindingStatus(t, h, "acme", "hooks")
				return s.Processed+s.Poisoned == good+bad
			})
			rc.mu.Lock()
			delivered, duplicates, retried := 0, 0, 0
			for _, n := range rc.accepted {
				delivered++
				duplicates += n - 1
			}
			for _, n := range rc.attempts {
				retried += n - 1
			}
			unauth := rc.unauth
			rc.mu.Unlock()
			dls, err := ListDeadLetters(context.Background(), cfg, "acme", "hooks", 0)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Printf("webhook: sent=%d delivered=%d poisoned=%d duplicates=%d (%s, %d retried deliveries)\n",
				good+bad, delivered, len(dls), duplicates, mod, retried)
			if delivered+len(dls) != good+bad || duplicates != 0 || unauth != 0 {
				t.Errorf("delivered %d + poisoned %d != sent %d, or %d duplicates, or %d requests without the credential", delivered, len(dls), good+bad, duplicates, unauth)
			}
			if retried == 0 {
				t.Error("the receiver's 503s caused no retries")
			}
			for _, d := range dls {
				bad := strings.HasPrefix(string(d.Body), "bad")
				if !bad || !strings.Contains(d.Reason, "status 400") || !strings.Contains(d.Reason, "/hooks/in") {
					t.Errorf("dead letter %q: reason %q; want only bad bodies, with status 400 and the URL", d.Body, d.Reason)
				}
				if strings.Contains(d.Reason, "querysecret") || strings.Contains(d.Reason, "e2e-webhook-secret") {
					t.Errorf("dead letter reason %q shows the query or the credential", d.Reason)
				}
			}
			s := bindingStatus(t, h, "acme", "hooks")
			rc.mu.Lock()
			attempts := 0
			for _, n := range rc.attempts {
				attempts += n
			}
			rc.mu.Unlock()
			if s.HTTP.Requests != int64(attempts) || s.HTTP.BytesOut == 0 {
				t.Errorf("status http %+v; want %d requests", s.HTTP, attempts)
			}
			admin := httptest.NewServer(h.AdminHandler())
			defer admin.Close()
			metrics := get(t, admin.URL+"/metrics", "", http.StatusOK)
			for _, want := range []string{
				fmt.Sprintf(`wqhost_http_requests_total{binding="hooks",queue="hooks",tenant="acme"} %d`, attempts),
				`wqhost_http_sent_bytes_total{binding="hooks",queue="hooks",tenant="acme"}`,
				`wqhost_http_wait_seconds_total{binding="hooks",queue="hooks",tenant="acme"}`,
			} {
				if !strings.Contains(metrics, want) {
					t.Errorf("/metrics lacks %s", want)
				}
			}
			if st := get(t, admin.URL+"/v1/status", "", http.StatusOK); !strings.Contains(st, fmt.Sprintf(`"requests": %d`, attempts)) {
				t.Errorf("/v1/status lacks the http requests (%d)", attempts)
			}
		})
	}
}
