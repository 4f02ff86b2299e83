// Package natstest starts an embedded NATS server with JetStream on a loopback port for
// tests. The fault suite runs its clusters as nats-server processes (faulttest).
package natstest

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Server starts one JetStream server on a loopback port with its store in a temp dir, shut
// down in t.Cleanup. It returns the client URL.
func Server(t testing.TB) (*server.Server, string) {
	t.Helper()
	s, err := Start(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s, s.ClientURL()
}

// Start starts a server with opts and waits until it accepts clients.
func Start(opts *server.Options) (*server.Server, error) {
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("natstest: new server: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("natstest: server %s not ready within 10s", opts.ServerName)
	}
	return s, nil
}
