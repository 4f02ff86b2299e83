package host

import (
	"sync"
	"time"
)

// lastError keeps the latest failure of a recurring operation (a config reload) for status:
// set on failure, cleared on success.
type lastError struct {
	mu  sync.Mutex
	msg string
	at  time.Time
}

func (e *lastError) set(err error, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err == nil {
		e.msg, e.at = "", time.Time{}
		return
	}
	e.msg, e.at = err.Error(), now
}

// get returns the message and its time, or "" and nil.
func (e *lastError) get() (string, *time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.msg == "" {
		return "", nil
	}
	at := e.at
	return e.msg, &at
}
