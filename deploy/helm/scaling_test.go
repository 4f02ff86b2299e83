package helm

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/netpolicy"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/yaml"
)

// scaledObject is the part of a KEDA ScaledObject the checks read (the whole object was
// validated against KEDA's CRD when it was rendered).
type scaledObject struct {
	Spec struct {
		ScaleTargetRef struct {
			Name string `json:"name"`
		} `json:"scaleTargetRef"`
		Triggers []struct {
			Type              string            `json:"type"`
			Metadata          map[string]string `json:"metadata"`
			AuthenticationRef *struct {
				Name string `json:"name"`
			} `json:"authenticationRef"`
		} `json:"triggers"`
	} `json:"spec"`
}

// checkScaledObject: one azure-queue trigger for every queue a binding reads, named as the
// host names it on Azure, authenticated as the host is.
func checkScaledObject(t *testing.T, r rendered, cfg *config.Config, dep *appsv1.Deployment, c corev1.Container) {
	t.Helper()
	var so scaledObject
	if err := yaml.Unmarshal(r.one(t, "ScaledObject").raw, &so); err != nil {
		t.Fatal(err)
	}
	if so.Spec.ScaleTargetRef.Name != dep.Name {
		t.Errorf("ScaledObject scales %q, want the Deployment %q", so.Spec.ScaleTargetRef.Name, dep.Name)
	}
	var want, got []string
	for _, b := range bindings(cfg) {
		qs := b.Shards
		if len(qs) == 0 {
			qs = []string{b.Queue}
		}
		for _, q := range qs {
			want = append(want, cfg.PhysicalQueue(b.tenant, b.Backend, q))
		}
	}
	env := map[string]bool{}
	for _, e := range c.Env {
		env[e.Name] = true
	}
	tas := r.find("TriggerAuthentication")
	for _, tr := range so.Spec.Triggers {
		if tr.Type != "azure-queue" {
			continue
		}
		got = append(got, tr.Metadata["queueName"])
		if n, err := strconv.Atoi(tr.Metadata["queueLength"]); err != nil || n < 1 {
			t.Errorf("trigger queueLength %q: want a positive integer", tr.Metadata["queueLength"])
		}
		if e := tr.Metadata["connectionFromEnv"]; e != "" {
			be, _ := cfg.BackendFor("azure")
			if !env[e] || e != be.ConnectionStringEnv {
				t.Errorf("trigger connectionFromEnv %q: want the container's variable the host reads (%q)", e, be.ConnectionStringEnv)
			}
		} else if tr.AuthenticationRef == nil || len(tas) != 1 || tr.AuthenticationRef.Name != tas[0].name || tr.Metadata["accountName"] == "" {
			t.Errorf("trigger %v: want connectionFromEnv, or accountName with the TriggerAuthentication", tr.Metadata)
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(want, got) {
		t.Errorf("azure-queue triggers watch %q, want the bindings' queues %q", got, want)
	}
}

// checkNetworkPolicy: every http.allow rule of the config has an egress rule on its port;
// one naming addresses allows those, a name rule none of the ranges the host refuses for
// names.
func checkNetworkPolicy(t *testing.T, cfg *config.Config, o object) {
	t.Helper()
	np := o.typed.(*networkingv1.NetworkPolicy)
	byRule := map[string]networkingv1.NetworkPolicyEgressRule{}
	// The template writes each http rule's egress entry after a comment naming the rule.
	raw := string(o.raw)
	egress := np.Spec.Egress
	for _, b := range bindings(cfg) {
		for _, s := range b.HTTP.Allow {
			i := strings.Index(raw, "# "+s+"\n")
			if i < 0 {
				t.Errorf("http.allow %q has no egress rule", s)
				continue
			}
			// The nth comment of that kind is the nth entry after the fixed ones.
			n := strings.Count(raw[:i], "\n    - # ")
			fixed := len(egress) - strings.Count(raw, "\n    - # ")
			byRule[s] = egress[fixed+n]
		}
	}
	for s, e := range byRule {
		rule, err := netpolicy.ParseRule(s)
		if err != nil {
			t.Fatal(err)
		}
		if rule.Port == netpolicy.AnyPort {
			if len(e.Ports) != 0 {
				t.Errorf("%q (any port): egress limited to ports %v", s, e.Ports)
			}
		} else if len(e.Ports) != 1 || e.Ports[0].Port.IntValue() != rule.Port {
			t.Errorf("%q: egress ports %v, want %d", s, e.Ports, rule.Port)
		}
		if rule.NamesIP() {
			if len(e.To) != 1 || e.To[0].IPBlock == nil || e.To[0].IPBlock.CIDR != rule.Prefix.String() {
				t.Errorf("%q: egress to %+v, want exactly %s", s, e.To, rule.Prefix)
			}
			continue
		}
		for _, peer := range e.To {
			if peer.IPBlock == nil {
				t.Errorf("%q: egress to %+v, want address blocks", s, peer)
				continue
			}
			for _, ex := range peer.IPBlock.Except {
				p, err := netip.ParsePrefix(ex)
				if err != nil {
					t.Fatalf("%q: except %q: %v", s, ex, err)
				}
				if _, special := netpolicy.Special(p.Addr()); !special {
					t.Errorf("%q: except %s, which the host does not refuse for names", s, ex)
				}
			}
			for _, a := range []string{"10.1.2.3", "127.0.0.1", "169.254.169.254", "192.168.1.1", "fd00::1", "fe80::1"} {
				addr := netip.MustParseAddr(a)
				cidr := netip.MustParsePrefix(peer.IPBlock.CIDR)
				if !cidr.Contains(addr) {
					continue
				}
				excluded := false
				for _, ex := range peer.IPBlock.Except {
					if netip.MustParsePrefix(ex).Contains(addr) {
						excluded = true
					}
				}
				if !excluded {
					t.Errorf("%q: egress reaches %s, which the host refuses for a name rule", s, a)
				}
			}
		}
	}
}

// TestChartRefuses: values the chart must not install, each refused with an error naming
// what is wrong.
func TestChartRefuses(t *testing.T) {
	for _, c := range []struct {
		name, values, want string
	}{
		{"nats until the JetStream backend exists", "mode: nats\n", "mode"},
		{"two sqlite replicas", "mode: sqlite\nreplicas: 2\n", "replicas"},
		{"sqlite scaled by KEDA", "mode: sqlite\nscaling: {kind: keda}\n", "kind"},
		{"azure without a connection string Secret", "mode: azure\n", "azure.connectionString.secretName is required"},
		{"workload identity without an account", "mode: azure\nazure: {auth: workloadIdentity}\n", "accountName"},
		{"private cloud without its endpoint suffix", "mode: azure\nazure: {connectionString: {secretName: s}, cloud: Private}\n", "endpointSuffix"},
		{"a binding on another backend", "mode: azure\nazure: {connectionString: {secretName: s}}\ntenants: {default: {bindings: {b: {queue: jobs, module: builtin:echo-go, backend: local}}}}\n", `tenants.default.bindings.b.backend: "local"`},
		{"a key the chart owns in config", "config: {admin: {addr: \":1\"}}\n", "admin"},
		{"an unknown value", "replica: 3\n", "replica"},
		{"a grace below the host's", "shutdown: {graceSeconds: 10, releaseSeconds: 5, preStopSleepSeconds: 0}\n", "graceSeconds"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := render(t, values(t, c.values))
			if err == nil {
				t.Fatalf("rendered; want an error naming %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not name %q", err, c.want)
			}
		})
	}
}
