package helm

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/wqhost/wqhost/host/config"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// natsStream is the stream listener/nats opens for a physical queue when the config binds
// no stream to it: the prefix, then the queue with every byte but letters, digits and '-'
// escaped as _XX (listener/nats streamName, which is unexported).
func natsStream(prefix, queue string) string {
	var sb strings.Builder
	sb.WriteString(prefix)
	for i := 0; i < len(queue); i++ {
		c := queue[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' {
			sb.WriteByte(c)
			continue
		}
		fmt.Fprintf(&sb, "_%02X", c)
	}
	return sb.String()
}

// checkNATSScaledObject: one nats-jetstream trigger for every queue a binding reads, on the
// stream and durable consumer the host's nats backend uses.
func checkNATSScaledObject(t *testing.T, r rendered, cfg *config.Config) {
	t.Helper()
	var so scaledObject
	if err := yaml.Unmarshal(r.one(t, "ScaledObject").raw, &so); err != nil {
		t.Fatal(err)
	}
	var want, got []string
	for _, b := range bindings(cfg) {
		be, _ := cfg.BackendFor(b.Backend)
		if be.Type != "nats" {
			t.Errorf("nats: binding reads backend %q of type %s, want nats", b.Backend, be.Type)
		}
		qs := b.Shards
		if len(qs) == 0 {
			qs = []string{b.Queue}
		}
		for _, q := range qs {
			want = append(want, natsStream(be.NATS.StreamPrefix, cfg.PhysicalQueue(b.tenant, b.Backend, q))+"/"+be.NATS.Consumer)
		}
	}
	for _, tr := range so.Spec.Triggers {
		if tr.Type == "nats-jetstream" {
			got = append(got, tr.Metadata["stream"]+"/"+tr.Metadata["consumer"])
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("nats-jetstream triggers watch stream/consumer %q, want %q", got, want)
	}
}

// checkNATSCA: a ca_file the nats backend names lies on a read-only mount of the container.
func checkNATSCA(t *testing.T, cfg *config.Config, c corev1.Container) {
	t.Helper()
	be, _ := cfg.BackendFor("nats")
	if be.NATS.CAFile == "" {
		return
	}
	for _, m := range c.VolumeMounts {
		if strings.HasPrefix(be.NATS.CAFile, m.MountPath+"/") && m.ReadOnly {
			return
		}
	}
	t.Errorf("nats ca_file %q is on no read-only volume mount", be.NATS.CAFile)
}

// TestNATSStreamNames pins the escaping both the chart and the check above copy.
func TestNATSStreamNames(t *testing.T) {
	for _, c := range []struct{ q, want string }{{"jobs", "WQ_jobs"}, {"acme.hooks-a", "WQ_acme_2Ehooks-a"}} {
		if got := natsStream("WQ_", c.q); got != c.want {
			t.Errorf("natsStream(%q) = %q, want %q", c.q, got, c.want)
		}
	}
}
