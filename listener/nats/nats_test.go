package nats_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener"
	wqnats "github.com/wqhost/wqhost/listener/nats"
	"github.com/wqhost/wqhost/listener/nats/natstest"
	"github.com/wqhost/wqhost/listener/queuetest"
)

var prefix atomic.Int64

// open returns a backend on url whose streams no other test uses.
func open(t testing.TB, url string, mod func(*wqnats.Options)) *wqnats.Backend {
	t.Helper()
	n := prefix.Add(1)
	opts := wqnats.Options{URLs: []string{url}, CreateQueues: true, StreamPrefix: fmt.Sprintf("T%d_", n),
		SubjectPrefix: fmt.Sprintf("t%d.", n), MemoryStorage: true}
	if mod != nil {
		mod(&opts)
	}
	b, err := wqnats.Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestConformance(t *testing.T) {
	_, url := natstest.Server(t)
	queuetest.Run(t, func(t *testing.T) (listener.Backend, func(time.Duration)) {
		return open(t, url, nil), nil
	})
}
