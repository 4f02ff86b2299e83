package runtime

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Bounds of the keep-alive transport.
const (
	// maxInlineBody is the largest request body sent on the calling goroutine; a larger one
	// goes through net/http's Transport, which writes it while it reads the answer.
	maxInlineBody = 64 << 10
	// maxIdlePerHost and maxIdle bound a binding's idle connections (per host, in all).
	maxIdlePerHost = 16
	maxIdle        = 64
	// idleTimeout closes a connection unused this long.
	idleTimeout = 90 * time.Second
	// max1xx bounds the informational responses skipped before the final one.
	max1xx = 5
)

// keepAlive is a binding's HTTP/1.1 round tripper: each request is written and its answer
// read on the calling goroutine, over a connection of the binding's own idle pool. net/http's
// Transport hands every request to two goroutines of the connection and back (about a fifth
// of a loopback request, and more once a guest's caches are cold); this does not. The wire
// format is net/http's (Request.Write, ReadResponse) and redirects stay with http.Client.
// Connections come from dial, which checks every resolved address against the policy, and
// are never shared with another binding. A request with a body over maxInlineBody, or a
// scheme other than http and https, goes to next.
type keepAlive struct {
	dial           func(ctx context.Context, network, addr string) (net.Conn, error)
	tlsConfig      *tls.Config // cloned per connection with ServerName set
	handshake      time.Duration
	maxHeaderBytes int64
	next           http.RoundTripper

	mu     sync.Mutex
	idle   map[string][]*hconn // by scheme://host:port, oldest first
	nIdle  int
	sweep  *time.Timer // closes connections idle past idleTimeout; nil when none is idle
	closed bool
}

// hconn is one connection and its buffers.
type hconn struct {
	key   string
	conn  net.Conn // the TLS connection for https
	raw   net.Conn // the TCP connection under it, for the liveness check
	lr    *limitReader
	br    *bufio.Reader
	bw    *bufio.Writer
	since time.Time // idle since
	used  bool      // has carried a request before this one
}

// limitReader counts the bytes read from the connection while a response's header is read,
// so a server cannot send an endless header.
type limitReader struct {
	r io.Reader
	n int64 // bytes left; < 0: no limit
}

var errHeaderTooLarge = fmt.Errorf("the response header exceeds %d KiB", maxHTTPHeaderBytes>>10)

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n == 0 {
		return 0, errHeaderTooLarge
	}
	if l.n > 0 && int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	if l.n > 0 {
		l.n -= int64(n)
	}
	return n, err
}

func newKeepAlive(dial func(ctx context.Context, network, addr string) (net.Conn, error), handshake time.Duration, maxHeaderBytes int64, next http.RoundTripper) *keepAlive {
	return &keepAlive{
		dial: dial, handshake: handshake, maxHeaderBytes: maxHeaderBytes, next: next,
		tlsConfig: &tls.Config{
			MinVersion: tls.VersionTLS12,
			// One request per message: HTTP/1.1 with keep-alive is what this transport speaks.
			NextProtos:         []string{"http/1.1"},
			ClientSessionCache: tls.NewLRUClientSessionCache(maxIdle),
		},
		idle: map[string][]*hconn{},
	}
}

// RoundTrip implements http.RoundTripper.
func (t *keepAlive) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" || req.ContentLength > maxInlineBody ||
		req.ContentLength < 0 || req.Body != nil && req.Body != http.NoBody && req.ContentLength == 0 {
		return t.next.RoundTrip(req)
	}
	ctx := req.Context()
	key := req.URL.Scheme + "://" + canonicalAddr(req)
	for attempt := 0; ; attempt++ {
		c, err := t.conn(ctx, key, req)
		if err != nil {
			if req.Body != nil {
				_ = req.Body.Close()
			}
			return nil, err
		}
		resp, read, err := t.exchange(ctx, c, req)
		if err == nil {
			return resp, nil
		}
		_ = c.conn.Close()
		// A connection the server closed while it was idle fails before any answer: send
		// the request again on a new one, as net/http does, if it can be sent twice.
		if attempt > 0 || !c.used || read || ctx.Err() != nil || !replayable(req) {
			return nil, err
		}
		if req.GetBody != nil {
			body, gerr := req.GetBody()
			if gerr != nil {
				return nil, err
			}
			req = req.Clone(ctx)
			req.Body = body
		}
	}
}

// canonicalAddr is host:port with the scheme's port when the URL has none.
func canonicalAddr(req *http.Request) string {
	port := req.URL.Port()
	if port == "" {
		port = "80"
		if req.URL.Scheme == "https" {
			port = "443"
		}
	}
	return net.JoinHostPort(req.URL.Hostname(), port)
}

// replayable mirrors net/http: a request may be sent again when its method is idempotent or
// it carries an idempotency key, and its body can be read again.
func replayable(req *http.Request) bool {
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return false
	}
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, a := req.Header["Idempotency-Key"]
	_, b := req.Header["X-Idempotency-Key"]
	return a || b
}

// conn returns an idle connection for key that is still open, or dials one.
func (t *keepAlive) conn(ctx context.Context, key string, req *http.Request) (*hconn, error) {
	for {
		c := t.take(key)
		if c == nil {
			break
		}
		if alive(c.raw) {
			c.used = true
			return c, nil
		}
		_ = c.conn.Close()
	}
	addr := strings.TrimPrefix(strings.TrimPrefix(key, "https://"), "http://")
	raw, err := t.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	conn := raw
	if req.URL.Scheme == "https" {
		cfg := t.tlsConfig.Clone()
		cfg.ServerName = req.URL.Hostname()
		tc := tls.Client(raw, cfg)
		hctx, cancel := context.WithTimeout(ctx, t.handshake)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			_ = raw.Close()
			return nil, err
		}
		conn = tc
	}
	c := &hconn{key: key, conn: conn, raw: raw, lr: &limitReader{r: conn, n: -1}}
	c.br = bufio.NewReaderSize(c.lr, 4<<10)
	c.bw = bufio.NewWriterSize(conn, 4<<10)
	return c, nil
}

// take removes the most recently used idle connection for key.
func (t *keepAlive) take(key string) *hconn {
	t.mu.Lock()
	defer t.mu.Unlock()
	cs := t.idle[key]
	if len(cs) == 0 {
		return nil
	}
	c := cs[len(cs)-1]
	cs[len(cs)-1] = nil
	if len(cs) == 1 {
		delete(t.idle, key)
	} else {
		t.idle[key] = cs[:len(cs)-1]
	}
	t.nIdle--
	return c
}

// put keeps c for the next request to its host, or closes it past the bounds.
func (t *keepAlive) put(c *hconn) {
	t.mu.Lock()
	if t.closed || len(t.idle[c.key]) >= maxIdlePerHost || t.nIdle >= maxIdle {
		t.mu.Unlock()
		_ = c.conn.Close()
		return
	}
	c.since = time.Now()
	t.idle[c.key] = append(t.idle[c.key], c)
	t.nIdle++
	if t.sweep == nil {
		t.sweep = time.AfterFunc(idleTimeout, t.closeExpired)
	}
	t.mu.Unlock()
}

// closeExpired closes the connections idle past idleTimeout.
func (t *keepAlive) closeExpired() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sweep = nil
	cutoff := time.Now().Add(-idleTimeout)
	for key, cs := range t.idle {
		n := 0
		for n < len(cs) && cs[n].since.Before(cutoff) {
			_ = cs[n].conn.Close()
			n++
		}
		t.nIdle -= n
		if n == len(cs) {
			delete(t.idle, key)
		} else {
			t.idle[key] = append(cs[:0], cs[n:]...)
		}
	}
	if t.nIdle > 0 && !t.closed {
		t.sweep = time.AfterFunc(idleTimeout/2, t.closeExpired)
	}
}

// CloseIdleConnections closes the idle connections, and those of next. The pool calls it
// when it closes, so it also ends pooling: a connection given back later is closed.
func (t *keepAlive) CloseIdleConnections() {
	t.mu.Lock()
	t.closed = true
	for _, cs := range t.idle {
		for _, c := range cs {
			_ = c.conn.Close()
		}
	}
	clear(t.idle)
	t.nIdle = 0
	if t.sweep != nil {
		t.sweep.Stop()
		t.sweep = nil
	}
	t.mu.Unlock()
	if ci, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// aLongTimeAgo is a deadline that makes blocked reads and writes return at once.
var aLongTimeAgo = time.Unix(1, 0)

// exchange writes req on c and reads the answer's header. read reports that some of an
// answer arrived (so the request must not be sent again).
func (t *keepAlive) exchange(ctx context.Context, c *hconn, req *http.Request) (resp *http.Response, read bool, err error) {
	// The request's context (http.timeout, the message's time limit) interrupts the
	// connection wherever it is blocked.
	stop := context.AfterFunc(ctx, func() { _ = c.conn.SetDeadline(aLongTimeAgo) })
	defer func() {
		if err != nil {
			stop()
			if cerr := ctx.Err(); cerr != nil {
				err = fmt.Errorf("%w (%w)", cerr, err)
			}
		}
	}()
	werr := req.Write(c.bw)
	if werr == nil {
		werr = c.bw.Flush()
	}
	// A server may answer before it reads the whole body, and close: its answer still counts.
	c.lr.n = t.maxHeaderBytes
	for n1xx := 0; ; n1xx++ {
		resp, err = http.ReadResponse(c.br, req)
		read = read || c.lr.n != t.maxHeaderBytes
		if err != nil {
			if werr != nil {
				return nil, read, werr
			}
			if errors.Is(err, errHeaderTooLarge) {
				return nil, true, err
			}
			return nil, read, err
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
		if n1xx >= max1xx {
			return nil, true, fmt.Errorf("more than %d informational (1xx) responses", max1xx)
		}
		_ = resp.Body.Close()
	}
	c.lr.n = -1
	reuse := werr == nil && !resp.Close && resp.StatusCode != http.StatusSwitchingProtocols
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// No protocol switch for a guest: the answer has no body, and the connection ends.
		resp.Body = http.NoBody
	}
	b := &hbody{ctx: ctx, t: t, c: c, rc: resp.Body, stop: stop, reuse: reuse}
	if resp.Body == http.NoBody {
		b.finish(true)
		return resp, true, nil
	}
	resp.Body = b
	return resp, true, nil
}

// hbody is a response body that gives its connection back once read to the end.
type hbody struct {
	ctx   context.Context
	t     *keepAlive
	c     *hconn
	rc    io.ReadCloser
	stop  func() bool
	reuse bool
	done  bool
	err   error // what every Read returns once done: io.EOF, or what ended the body
}

func (b *hbody) Read(p []byte) (int, error) {
	if b.done {
		return 0, b.err
	}
	n, err := b.rc.Read(p)
	if err != nil {
		b.finish(err == io.EOF)
		if cerr := b.ctx.Err(); err != io.EOF && cerr != nil {
			// The connection's deadline was the context's doing: say so, as net/http does.
			err = fmt.Errorf("%w (%w)", cerr, err)
		}
		b.err = err
	}
	return n, err
}

// Close ends the body; one not read to the end closes its connection.
func (b *hbody) Close() error {
	if !b.done {
		b.finish(false)
		b.err = errors.New("http: read on closed response body")
	}
	return nil
}

// finish gives the connection back when the body ended cleanly and the connection can carry
// another request (nothing left over, no close asked, its deadline untouched), else closes it.
func (b *hbody) finish(eof bool) {
	b.done = true
	if b.stop() && eof && b.reuse && b.c.br.Buffered() == 0 {
		_ = b.rc.Close()
		b.t.put(b.c)
		return
	}
	// The connection first: closing a body net/http read with ReadResponse reads it to the
	// end, which must fail at once rather than download what the guest left.
	_ = b.c.conn.Close()
	_ = b.rc.Close()
}
