package wqhost

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestCodeError(t *testing.T) {
	tests := []struct {
		code int32
		want error
	}{
		{0, nil}, {7, nil}, {-1, ErrNotFound}, {-2, ErrDenied}, {-3, ErrTooLarge}, {-4, ErrLimit}, {-5, ErrInvalid},
	}
	for _, tc := range tests {
		if got := codeError(tc.code); !errors.Is(got, tc.want) || (tc.want == nil) != (got == nil) {
			t.Errorf("codeError(%d) = %v, want %v", tc.code, got, tc.want)
		}
	}
	if err := codeError(-42); err == nil || err.Error() != "wqhost: unknown host error code -42" {
		t.Errorf("codeError(-42) = %v, want an error naming the code", err)
	}
}

func TestEmitErrorUnwraps(t *testing.T) {
	err := error(&EmitError{Queue: "other", Err: codeError(-2)})
	if !errors.Is(err, ErrDenied) || err.Error() != `wqhost: emit to queue "other": wqhost: queue denied` {
		t.Fatalf("EmitError = %q, want it to name the queue and unwrap to ErrDenied", err)
	}
}

func TestFinish(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name      string
		r         Result
		want      int32
		wantErr   string
		wantDelay int64 // -1: retry_after not called
	}{
		{"ok", OK(), 0, "", -1},
		{"retry with delay", Retry(1500*time.Millisecond, boom), 1, "boom", 1500},
		{"retry policy delay", Retry(0, boom), 1, "boom", -1},
		{"retry sub-millisecond rounds up", Retry(time.Microsecond, nil), 1, "", 1},
		{"reject", Reject(boom), 2, "boom", -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gotErr, gotDelay := "", int64(-1)
			got := finish(tc.r, func(s string) { gotErr = s }, func(ms int64) { gotDelay = ms })
			if got != tc.want || gotErr != tc.wantErr || gotDelay != tc.wantDelay {
				t.Fatalf("finish = %d, error %q, delay %d; want %d, %q, %d", got, gotErr, gotDelay, tc.want, tc.wantErr, tc.wantDelay)
			}
		})
	}
}

func TestParseMetadata(t *testing.T) {
	if n, err := parseDequeueCount("3"); err != nil || n != 3 {
		t.Errorf("parseDequeueCount(3) = %d, %v", n, err)
	}
	for _, bad := range []string{"", "-1", "x"} {
		if _, err := parseDequeueCount(bad); err == nil {
			t.Errorf("parseDequeueCount(%q) succeeded", bad)
		}
	}
	at, err := parseInsertedAt("2026-11-22T13:45:01.123456789Z")
	if err != nil || !at.Equal(time.Date(2026, 11, 22, 13, 45, 1, 123456789, time.UTC)) {
		t.Errorf("parseInsertedAt = %v, %v", at, err)
	}
	if _, err := parseInsertedAt("yesterday"); err == nil {
		t.Error("parseInsertedAt(yesterday) succeeded")
	}
}

// fakeGet behaves like msg_meta/config_get over a map.
func fakeGet(values map[string]string) func(string, []byte) int32 {
	return func(key string, buf []byte) int32 {
		v, ok := values[key]
		if !ok {
			return -1
		}
		copy(buf, v)
		return int32(len(v))
	}
}

func TestLookup(t *testing.T) {
	long := strings.Repeat("x", smallValue+1)
	get := fakeGet(map[string]string{"tax_rate": "0.2", "empty": "", "long": long})
	tests := []struct {
		key    string
		want   string
		wantOK bool
	}{
		{"tax_rate", "0.2", true}, {"empty", "", true}, {"missing", "", false}, {"long", long, true},
	}
	for _, tc := range tests {
		// Small buffers of every relevant size: the value fits, fits exactly, or is read again.
		for _, size := range []int{0, 2, 3, smallValue} {
			small := make([]byte, size)
			if got, ok := lookup(get, tc.key, small, get(tc.key, small)); got != tc.want || ok != tc.wantOK {
				t.Errorf("lookup(%q) with a %d-byte buffer = %q, %v; want %q, %v", tc.key, size, got, ok, tc.want, tc.wantOK)
			}
		}
	}
}

func TestHandleWithoutHandlerRejects(t *testing.T) {
	var s guest
	if got := s.handle(); got != int32(StatusReject) {
		t.Fatalf("handle with no handler = %d, want reject", got)
	}
	s.handler = func(*Message) Result { return Retry(time.Second, nil) }
	if got := s.handle(); got != int32(StatusRetry) {
		t.Fatalf("handle = %d, want retry", got)
	}
}
