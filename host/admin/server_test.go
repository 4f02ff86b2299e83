package admin

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"
)

// serve runs NewServer(h, to) on a loopback port and returns its address.
func serve(t *testing.T, h http.Handler, to Timeouts) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(h, to)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// hungUp reports whether the server closes c (EOF or reset) within 10s, reading and
// discarding whatever it answers first.
func hungUp(t *testing.T, c net.Conn) bool {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// TestServerTimeouts: a client that stalls in a request's header or body, or keeps an idle
// connection, is hung up on; a handler whose answer a client does not read fails its write
// instead of blocking; a handler that works longer than the write timeout before answering
// (a reload) still gets its answer through.
func TestServerTimeouts(t *testing.T) {
	to := Timeouts{ReadHeader: 150 * time.Millisecond, Read: 200 * time.Millisecond, Write: 500 * time.Millisecond, Idle: 200 * time.Millisecond}
	writeErr := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		switch r.URL.Path {
		case "/late":
			time.Sleep(3 * to.Write)
			fmt.Fprint(w, "late but whole")
		case "/huge":
			chunk := make([]byte, 1<<20)
			var err error
			for i := 0; i < 1024 && err == nil; i++ {
				_, err = w.Write(chunk)
			}
			writeErr <- err
		default:
			fmt.Fprint(w, "ok")
		}
	})
	addr := serve(t, h, to)
	dial := func(t *testing.T, send string) net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		if _, err := io.WriteString(c, send); err != nil {
			t.Fatal(err)
		}
		return c
	}
	t.Run("header never finished", func(t *testing.T) {
		if c := dial(t, "GET / HTTP/1.1\r\nHost: x\r\n"); !hungUp(t, c) {
			t.Error("connection still open 10s after a stalled header")
		}
	})
	t.Run("body never finished", func(t *testing.T) {
		if c := dial(t, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nab"); !hungUp(t, c) {
			t.Error("connection still open 10s after a stalled body")
		}
	})
	t.Run("idle keep-alive connection", func(t *testing.T) {
		c := dial(t, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("first request: %v %v", resp, err)
		}
		if !hungUp(t, c) {
			t.Error("idle connection still open 10s later")
		}
	})
	t.Run("answer never read", func(t *testing.T) {
		c := dial(t, "GET /huge HTTP/1.1\r\nHost: x\r\n\r\n")
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(4 << 10)
		}
		select {
		case err := <-writeErr:
			if err == nil {
				t.Error("1 GiB written to a client that reads nothing")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the handler's write still blocked 10s after the client stopped reading")
		}
	})
	t.Run("late answer", func(t *testing.T) {
		resp, err := http.Get("http://" + addr + "/late")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || string(b) != "late but whole" {
			t.Errorf("answer after %s of work: %q, %v", 3*to.Write, b, err)
		}
	})
}

// TestDefaultTimeouts: a server built with no timeouts has every one set.
func TestDefaultTimeouts(t *testing.T) {
	s := NewServer(http.NotFoundHandler(), Timeouts{})
	if s.ReadHeaderTimeout != DefaultReadHeaderTimeout || s.ReadTimeout != DefaultReadTimeout ||
		s.WriteTimeout != DefaultWriteTimeout || s.IdleTimeout != DefaultIdleTimeout {
		t.Errorf("timeouts %v %v %v %v", s.ReadHeaderTimeout, s.ReadTimeout, s.WriteTimeout, s.IdleTimeout)
	}
}

// TestAuthenticate: the Bearer scheme is matched in any case, with one or more spaces; a token
// two principals share authenticates neither.
func TestAuthenticate(t *testing.T) {
	s := &server{log: slog.New(slog.DiscardHandler), opts: Options{Tokens: Tokens{
		Host: "host-secret", Tenants: map[string]string{"acme": "acme-secret", "beta": "shared", "gamma": "shared"},
	}}}
	for _, tc := range []struct {
		header string
		want   principal
		ok     bool
	}{
		{"Bearer host-secret", principal{host: true}, true},
		{"bearer host-secret", principal{host: true}, true},
		{"BEARER acme-secret", principal{tenant: "acme"}, true},
		{"bEaReR   acme-secret", principal{tenant: "acme"}, true},
		{"Bearer", principal{}, false},
		{"Bearer ", principal{}, false},
		{"Basic host-secret", principal{}, false},
		{"Bearerhost-secret", principal{}, false},
		{"Bearer nope", principal{}, false},
		{"Bearer shared", principal{}, false}, // beta and gamma: ambiguous
	} {
		r, _ := http.NewRequest("GET", "/v1/status", nil)
		r.Header.Set("Authorization", tc.header)
		got, ok := s.authenticate(r)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%q: %+v %v, want %+v %v", tc.header, got, ok, tc.want, tc.ok)
		}
	}
}
