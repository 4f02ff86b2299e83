package http

import (
	"errors"
	"strings"
	"testing"
	"time"

	wqhost "github.com/wqhost/wqhost/sdk/go"
)

func TestResultFor(t *testing.T) {
	url := "https://hooks.example.com/in"
	status := func(code int, after time.Duration) error {
		return &Error{Method: "POST", URL: url, Status: code, RetryAfter: after, Err: ErrStatus}
	}
	for _, tt := range []struct {
		name   string
		err    error
		status wqhost.Status
		after  time.Duration
		reason string
	}{
		{"ok", nil, wqhost.StatusOK, 0, ""},
		{"503 with Retry-After", status(503, 20*time.Second), wqhost.StatusRetry, 20 * time.Second, "status 503"},
		{"429 Retry-After capped", status(429, time.Hour), wqhost.StatusRetry, time.Minute, "status 429"},
		{"408 without Retry-After: policy back-off", status(408, 0), wqhost.StatusRetry, 0, "status 408"},
		{"400 rejects", status(400, 0), wqhost.StatusReject, 0, "http POST https://hooks.example.com/in: status 400"},
		{"404 rejects", status(404, 5*time.Second), wqhost.StatusReject, 0, "status 404"},
		{"timeout retries", &Error{Method: "POST", URL: url, Err: ErrTimeout}, wqhost.StatusRetry, 0, "timed out"},
		{"network retries", &Error{Method: "POST", URL: url, Err: ErrNetwork}, wqhost.StatusRetry, 0, "network"},
		{"denied rejects", &Error{Method: "POST", URL: url, Err: wqhost.ErrDenied, Detail: "no http.allow rule matches"}, wqhost.StatusReject, 0, "no http.allow rule matches"},
		{"other errors retry", errors.New("boom"), wqhost.StatusRetry, 0, "boom"},
	} {
		r := ResultFor(tt.err, time.Minute)
		if r.Status() != tt.status || r.After() != tt.after {
			t.Errorf("%s: status %d after %s, want %d after %s", tt.name, r.Status(), r.After(), tt.status, tt.after)
		}
		if tt.reason != "" && (r.Err() == nil || !strings.Contains(r.Err().Error(), tt.reason)) {
			t.Errorf("%s: reason %v, want it to contain %q", tt.name, r.Err(), tt.reason)
		}
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://h.io/a?token=s3cret#x": "https://h.io/a",
		"https://user:pw@h.io/a?b":      "https://h.io/a",
		"https://h.io":                  "https://h.io",
		"http://h.io/p@q":               "http://h.io/p@q",
		"https://u:p@h.io":              "https://h.io",
		"not a url?with=query":          "not a url",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for in, want := range map[string]time.Duration{
		"":                              0,
		"30":                            30 * time.Second,
		"-5":                            0,
		"soon":                          0,
		"Fri, 02 Jan 2026 03:05:05 GMT": time.Minute,
		"Fri, 02 Jan 2026 03:00:00 GMT": 0,
	} {
		if got := parseRetryAfter(in, now); got != want {
			t.Errorf("parseRetryAfter(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestNativeStandInRefuses(t *testing.T) {
	_, err := Post("https://h.io/x?secret=1", []byte("b"), nil)
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, wqhost.ErrDenied) || e.URL != "https://h.io/x" {
		t.Fatalf("native Post: %v", err)
	}
}
