package host

import (
	"sync"
	"time"
)

// lastError keeps the latest failure of a recurring operation (a config reload) for status:
// set on failure, cleared on success, and when it last succeeded (the metrics an operator
// alerts on: wqhost_config_last_reload_successful and _success_timestamp_seconds).
type lastError struct {
	mu   sync.Mutex
	msg  string
	at   time.Time
	okAt time.Time // the last success; the host's start until a reload succeeds
}

func (e *lastError) set(err error, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err == nil {
		e.msg, e.at, e.okAt = "", time.Time{}, now
		return
	}
	e.msg, e.at = err.Error(), now
}

// lastSuccess returns when the operation last succeeded.
func (e *lastError) lastSuccess() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.okAt
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

// Changed counts the bindings and plugins the reload acted on (swapped, added, removed,
// rebuilt or failed): the count the admin API's audit log gives a reload.
func (r ReloadResult) Changed() int {
	n := 0
	for _, b := range r.Bindings {
		if b.Result != ReloadUnchanged {
			n++
		}
	}
	for _, p := range r.Plugins {
		if p.Result != ReloadUnchanged {
			n++
		}
	}
	return n
}
