package config

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The demo of README's "Outgrowing one machine" stays runnable: its config loads, points at
// the three nodes scripts/nats-cluster.sh starts (client ports 4221+N), with R3 streams, and
// both scripts parse (bash -n). scripts/demo-nats.sh runs the demo end to end.
func TestNATSDemoConfigAndScripts(t *testing.T) {
	c, err := Load(fileOptions(t, LoadOptions{File: "../../examples/nats-cluster.yaml", Environ: []string{}}))
	if err != nil {
		t.Fatal(err)
	}
	be, ok := c.Backends["js"]
	if !ok || be.Type != BackendNATS || be.NATS.Replicas != 3 || !be.CreateQueues {
		t.Fatalf("backend js = %+v; want nats, replicas 3, create_queues", be)
	}
	script, err := os.ReadFile("../../scripts/nats-cluster.sh")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(script), "-p $((4221 + n))") {
		t.Fatal("scripts/nats-cluster.sh no longer puts node N on client port 4221+N")
	}
	for i, u := range be.NATS.URLs {
		if want := fmt.Sprintf("nats://127.0.0.1:%d", 4222+i); u != want {
			t.Errorf("url %d = %s; want %s (node n%d of scripts/nats-cluster.sh)", i, u, want, i+1)
		}
	}
	if b := c.Tenants["default"].Bindings["echo"]; b.Backend != "js" || b.Queue != "jobs" || b.Output != "done" {
		t.Fatalf("binding echo = %+v; the demo drains jobs into done on js", b)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	for _, s := range []string{"../../scripts/nats-cluster.sh", "../../scripts/demo-nats.sh"} {
		if out, err := exec.Command(bash, "-n", s).CombinedOutput(); err != nil {
			t.Errorf("bash -n %s: %v\n%s", s, err, out)
		}
	}
}
