// Package natstest starts embedded NATS servers with JetStream on loopback ports for tests:
// one server, or a cluster whose nodes can be shut down and restarted on the same ports and
// store.
package natstest

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"
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

// Cluster is a JetStream cluster on loopback ports.
type Cluster struct {
	Opts    []*server.Options
	Servers []*server.Server // nil for a node that is down
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// StartCluster starts n nodes with stores under dir and waits for a JetStream meta leader.
func StartCluster(n int, dir string) (*Cluster, error) {
	c := &Cluster{}
	routes := make([]string, n)
	cports := make([]int, n)
	for i := range n {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		cports[i] = p
		routes[i] = fmt.Sprintf("nats-route://127.0.0.1:%d", p)
	}
	for i := range n {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		o := &server.Options{
			ServerName: fmt.Sprintf("n%d", i+1), Host: "127.0.0.1", Port: p, JetStream: true, NoSigs: true, NoLog: true,
			StoreDir: filepath.Join(dir, fmt.Sprintf("n%d", i+1)),
			Cluster:  server.ClusterOpts{Name: "wqhost", Host: "127.0.0.1", Port: cports[i]},
		}
		o.Routes = server.RoutesFromStr(strings.Join(routes, ","))
		c.Opts = append(c.Opts, o)
	}
	for i := range n {
		s, err := Start(c.Opts[i])
		if err != nil {
			c.Shutdown()
			return nil, err
		}
		c.Servers = append(c.Servers, s)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, s := range c.Servers {
			if s.JetStreamIsLeader() {
				return c, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.Shutdown()
	return nil, fmt.Errorf("natstest: no JetStream meta leader within 30s")
}

// URLs returns the client URLs of all nodes.
func (c *Cluster) URLs() []string {
	out := make([]string, len(c.Opts))
	for i, o := range c.Opts {
		out[i] = fmt.Sprintf("nats://127.0.0.1:%d", o.Port)
	}
	return out
}

// Kill shuts node i down.
func (c *Cluster) Kill(i int) {
	if c.Servers[i] != nil {
		c.Servers[i].Shutdown()
		c.Servers[i].WaitForShutdown()
		c.Servers[i] = nil
	}
}

// Restart starts node i again on its ports and store.
func (c *Cluster) Restart(i int) error {
	s, err := Start(c.Opts[i])
	if err != nil {
		return err
	}
	c.Servers[i] = s
	return nil
}

// StreamLeader returns the index of the node that leads stream (account $G), or -1.
func (c *Cluster) StreamLeader(stream string) int {
	for i, s := range c.Servers {
		if s == nil {
			continue
		}
		if s.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
			return i
		}
	}
	return -1
}

// Shutdown stops every node.
func (c *Cluster) Shutdown() {
	for i := range c.Servers {
		c.Kill(i)
	}
}
