package nats_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	wqnats "github.com/wqhost/wqhost/listener/nats"
	"github.com/wqhost/wqhost/listener/nats/natstest"
)

// A queue's Recovered channel closes once its consumer answers again: while the server is
// down it stays open, and within seconds of the server's return (same port, same store) it
// is closed.
func TestRecoveredAfterServerReturns(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	opts := server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true}
	o1 := opts
	s, err := natstest.Start(&o1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	b := open(t, s.ClientURL(), func(o *wqnats.Options) { o.MemoryStorage = false })
	q, err := b.Queue(context.Background(), "rec")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-q.Recovered():
	case <-time.After(5 * time.Second):
		t.Fatal("Recovered not closed within 5s while the server answers")
	}
	s.Shutdown()
	s.WaitForShutdown()
	ch := q.Recovered()
	select {
	case <-ch:
		t.Fatal("Recovered closed while the server is down")
	case <-time.After(2 * time.Second):
	}
	o2 := opts
	s2, err := natstest.Start(&o2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s2.Shutdown)
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("Recovered not closed within 10s of the server's return")
	}
}
