package runtime

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestWebhookVerdicts runs the webhook-delivery examples (Go, TinyGo and Rust) against a receiver
// answering each status: 2xx is ok; 408, 429 and 5xx retry after the receiver's Retry-After,
// capped by the config, or the binding's back-off without one; other 4xx reject with the
// status and URL (no query) in the reason.
func TestWebhookVerdicts(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The message body is "<status> [retry-after]".
		var after string
		buf := make([]byte, 64)
		n, _ := r.Body.Read(buf)
		f := strings.Fields(string(buf[:n]))
		code, _ := strconv.Atoi(f[0])
		if len(f) > 1 {
			after = f[1]
		}
		if r.Header.Get("Idempotency-Key") != "m-42" {
			code = 599
		}
		if after != "" {
			w.Header().Set("Retry-After", after)
		}
		w.WriteHeader(code)
	}))
	defer srv.Close()
	for _, mod := range []struct{ name, capKey, capVal string }{
		{"webhook-delivery-go", "max_retry_after", "1m"},
		{"webhook-delivery-tinygo", "max_retry_after", "1m"},
		{"webhook-delivery-rust", "max_retry_after_ms", "60000"},
	} {
		t.Run(mod.name, func(t *testing.T) {
			p := examplePool(t, mod.name, PoolConfig{
				Binding: "hooks",
				Config:  map[string]string{"url": srv.URL + "/in?sig=querysecret", mod.capKey: mod.capVal},
				HTTP:    &HTTPPolicy{Allow: rules(t, "http://127.0.0.1:*/in")},
			})
			for _, tt := range []struct {
				body   string
				status Verdict
				after  time.Duration
				reason string
			}{
				{"200", VerdictOK, 0, ""},
				{"204", VerdictOK, 0, ""},
				{"503 7", VerdictRetry, 7 * time.Second, "status 503"},
				{"429 99999", VerdictRetry, time.Minute, "status 429"},
				{"408", VerdictRetry, 0, "status 408"},
				{"500", VerdictRetry, 0, "status 500"},
				{"400 5", VerdictReject, 0, "status 400"},
				{"404", VerdictReject, 0, "status 404"},
			} {
				out, err := p.Call(context.Background(), &Input{ID: "m-42", Body: []byte(tt.body)})
				if err != nil {
					t.Fatalf("%s: %v", tt.body, err)
				}
				if out.Verdict != tt.status || out.RetryAfter != tt.after {
					t.Errorf("%s: status %d after %s (%s), want %d after %s", tt.body, out.Verdict, out.RetryAfter, out.ErrorText, tt.status, tt.after)
				}
				if tt.reason != "" && (!strings.Contains(out.ErrorText, tt.reason) || !strings.Contains(out.ErrorText, srv.URL+"/in")) {
					t.Errorf("%s: reason %q, want %q and the URL", tt.body, out.ErrorText, tt.reason)
				}
				if strings.Contains(out.ErrorText, "querysecret") {
					t.Errorf("%s: reason %q shows the query", tt.body, out.ErrorText)
				}
			}
		})
	}
}

// TestWebhookSDKReadsLongValuesAndCapsTheBody runs the SDKs' slower paths through the webhook
// examples: a config url longer than the SDKs' stack buffer (read again at its length) and a
// 1 MiB answer of which the handlers keep 1 KiB (they read one byte past it and stop).
func TestWebhookSDKReadsLongValuesAndCapsTheBody(t *testing.T) {
	pad := strings.Repeat("p", 400)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("pad") != pad {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		_, _ = w.Write(make([]byte, 1<<20))
	}))
	defer srv.Close()
	for _, mod := range []string{"webhook-delivery-go", "webhook-delivery-tinygo", "webhook-delivery-rust"} {
		t.Run(mod, func(t *testing.T) {
			p := examplePool(t, mod, PoolConfig{
				Binding: "hooks",
				Config:  map[string]string{"url": srv.URL + "/in?pad=" + pad},
				HTTP:    &HTTPPolicy{Allow: rules(t, "http://127.0.0.1:*/in")},
			})
			out, err := p.Call(context.Background(), &Input{ID: "m-1", Body: []byte("{}")})
			if err != nil {
				t.Fatal(err)
			}
			if out.Verdict != VerdictOK || out.HTTP.Requests != 1 || out.HTTP.BytesIn != 1025 {
				t.Errorf("status %d (%s), %d requests, %d bytes read; want ok, 1 request, 1025 bytes (max_body 1024 + 1)",
					out.Verdict, out.ErrorText, out.HTTP.Requests, out.HTTP.BytesIn)
			}
		})
	}
}

// TestWebhookBadConfigRejectsEveryMessage: the examples read their config once per instance;
// a config that is wrong rejects every message with the reason, not only the first.
func TestWebhookBadConfigRejectsEveryMessage(t *testing.T) {
	for _, tc := range []struct {
		mod    string
		config map[string]string
		reason string
	}{
		{"webhook-delivery-go", map[string]string{}, "config url is not set"},
		{"webhook-delivery-go", map[string]string{"url": "http://127.0.0.1:9/in", "max_retry_after": "soon"}, "max_retry_after soon is not a duration"},
		{"webhook-delivery-tinygo", map[string]string{"url": ""}, "config url is not set"},
		{"webhook-delivery-rust", map[string]string{}, "config url is not set"},
		{"webhook-delivery-rust", map[string]string{"url": "http://127.0.0.1:9/in", "max_retry_after_ms": "-1"}, `max_retry_after_ms "-1" is not a count of milliseconds`},
	} {
		t.Run(tc.mod, func(t *testing.T) {
			p := examplePool(t, tc.mod, PoolConfig{
				Binding: "hooks", MaxInstances: 1, Config: tc.config,
				HTTP: &HTTPPolicy{Allow: rules(t, "http://127.0.0.1:*/in")},
			})
			for i := range 2 {
				out, err := p.Call(context.Background(), &Input{ID: fmt.Sprintf("m-%d", i), Body: []byte("{}")})
				if err != nil {
					t.Fatal(err)
				}
				if out.Verdict != VerdictReject || !strings.Contains(out.ErrorText, tc.reason) || out.HTTP.Requests != 0 {
					t.Errorf("message %d: status %d, reason %q, %d requests; want reject with %q and no request", i, out.Verdict, out.ErrorText, out.HTTP.Requests, tc.reason)
				}
			}
		})
	}
}

// examplePool is a pool of the example handler mod (examples/handlers/<mod>/<mod>.wasm) with
// cfg, in tenant acme of its own engine; it is closed when the test ends.
func examplePool(t testing.TB, mod string, cfg PoolConfig) *Pool {
	t.Helper()
	e := testEngine(t)
	ten, err := e.Tenant("acme", TenantLimits{})
	if err != nil {
		t.Fatal(err)
	}
	path := fmt.Sprintf("../examples/handlers/%s/%s.wasm", mod, mod)
	p, err := ten.NewPool(context.Background(), load(t, e, path, ABIWqhostV1), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}
