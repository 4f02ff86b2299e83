package admin

import (
	"net/http"
	"sync"
	"time"
)

// Default timeouts of the admin server. An admin request is a small document (MaxBodyBytes)
// and every answer is one JSON or metrics document, never a stream, so a client that takes
// longer than these to send or take one is stalled or hostile, and holds a connection and a
// goroutine until it is cut.
const (
	// DefaultReadHeaderTimeout bounds reading a request's header.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultReadTimeout bounds reading a whole request, header and body.
	DefaultReadTimeout = 30 * time.Second
	// DefaultWriteTimeout bounds writing an answer, counted from its first byte: a handler
	// that works longer before answering (a reload compiling modules) is not cut, while a
	// client that stops reading is.
	DefaultWriteTimeout = 30 * time.Second
	// DefaultIdleTimeout closes a keep-alive connection with no request this long.
	DefaultIdleTimeout = 2 * time.Minute
)

// Timeouts of the admin server; zero fields take the defaults above.
type Timeouts struct {
	ReadHeader, Read, Write, Idle time.Duration
}

func (t Timeouts) withDefaults() Timeouts {
	for _, f := range []struct {
		v *time.Duration
		d time.Duration
	}{{&t.ReadHeader, DefaultReadHeaderTimeout}, {&t.Read, DefaultReadTimeout}, {&t.Write, DefaultWriteTimeout}, {&t.Idle, DefaultIdleTimeout}} {
		if *f.v <= 0 {
			*f.v = f.d
		}
	}
	return t
}

// NewServer returns the http.Server for the admin handler h, with read, write and idle
// timeouts (zero fields of to take the defaults). The write timeout runs from an answer's
// first byte (see DefaultWriteTimeout).
func NewServer(h http.Handler, to Timeouts) *http.Server {
	to = to.withDefaults()
	return &http.Server{
		Handler:           writeWindow(h, to.Write),
		ReadHeaderTimeout: to.ReadHeader,
		ReadTimeout:       to.Read,
		// The server's own deadline, from the end of the request's header, bounds a
		// handler that starts answering at once; writeWindow moves it for a late answer.
		WriteTimeout: to.Write,
		IdleTimeout:  to.Idle,
	}
}

// writeWindow gives each answer d to be written from its first byte, whenever that comes.
func writeWindow(next http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&windowWriter{ResponseWriter: w, d: d}, r)
	})
}

// windowWriter sets its connection's write deadline to d from the first header or body
// write.
type windowWriter struct {
	http.ResponseWriter
	d    time.Duration
	once sync.Once
}

func (w *windowWriter) start() {
	w.once.Do(func() {
		// ErrNotSupported outside an http.Server (httptest recorders): nothing to move.
		_ = http.NewResponseController(w.ResponseWriter).SetWriteDeadline(time.Now().Add(w.d))
	})
}

func (w *windowWriter) WriteHeader(code int) {
	w.start()
	w.ResponseWriter.WriteHeader(code)
}

func (w *windowWriter) Write(b []byte) (int, error) {
	w.start()
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *windowWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
