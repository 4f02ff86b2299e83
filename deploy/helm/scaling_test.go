package helm

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

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

// checkNetworkPolicy: every http.allow rule of the config is let through on its port by
// an egress rule: to the addresses a rule names by IP or CIDR, and for a name rule to a
// public address but to none of the addresses the host refuses for names.
func checkNetworkPolicy(t *testing.T, cfg *config.Config, o object) {
	t.Helper()
	np := o.typed.(*networkingv1.NetworkPolicy)
	public := netip.MustParseAddr("93.184.215.14")
	for _, b := range bindings(cfg) {
		for _, s := range b.HTTP.Allow {
			rule, err := netpolicy.ParseRule(s)
			if err != nil {
				t.Fatal(err)
			}
			port := rule.Port
			if port == netpolicy.AnyPort {
				port = 54321 // any port: an unusual one must pass too
			}
			target := public
			if rule.NamesIP() {
				target = rule.Prefix.Addr()
			}
			// The rule's own entry: one that lets the target through and, for a name rule,
			// none of the special addresses (the azure backend's 443 to backendCIDRs is a
			// separate entry, for the storage account's own addresses).
			specials := []string{"10.1.2.3", "127.0.0.1", "169.254.169.254", "100.100.100.200", "192.168.1.1", "fd00::1", "fe80::1"}
			found := false
			for _, e := range np.Spec.Egress {
				if !egressAllows(e, target, port) {
					continue
				}
				refuses := true
				for _, a := range specials {
					addr := netip.MustParseAddr(a)
					if _, special := netpolicy.Special(addr); !special {
						t.Fatalf("%s is not special to the host", a)
					}
					if !rule.NamesIP() && egressAllows(e, addr, port) {
						refuses = false
					}
				}
				found = found || refuses
			}
			if !found {
				t.Errorf("http.allow %q: no egress rule lets %s:%d through (a name rule's: without the addresses the host refuses for names)", s, target, port)
			}
		}
	}
}

// egressAllows reports whether e lets TCP to addr:port through.
func egressAllows(e networkingv1.NetworkPolicyEgressRule, addr netip.Addr, port int) bool {
	portOK := len(e.Ports) == 0
	for _, p := range e.Ports {
		if (p.Protocol == nil || *p.Protocol == corev1.ProtocolTCP) && (p.Port == nil || p.Port.IntValue() == port) {
			portOK = true
		}
	}
	if !portOK {
		return false
	}
	if len(e.To) == 0 {
		return true
	}
	for _, peer := range e.To {
		if peer.IPBlock == nil {
			continue
		}
		cidr, err := netip.ParsePrefix(peer.IPBlock.CIDR)
		if err != nil || !cidr.Contains(addr) {
			continue
		}
		excepted := false
		for _, ex := range peer.IPBlock.Except {
			if p, err := netip.ParsePrefix(ex); err == nil && p.Contains(addr) {
				excepted = true
			}
		}
		if !excepted {
			return true
		}
	}
	return false
}

// TestChartRefuses: values the chart must not install, each refused with an error naming
// what is wrong.
func TestChartRefuses(t *testing.T) {
	for _, c := range []struct {
		name, values, want string
	}{
		{"nats without servers", "mode: nats\nnats: {monitoringEndpoint: \"n:8222\"}\n", "'/nats/servers': minItems"},
		{"nats scaled by KEDA without a monitoring endpoint", "mode: nats\nnats: {servers: [\"nats://n:4222\"]}\n", "'/nats/monitoringEndpoint': minLength"},
		{"nats server not a URL", "mode: nats\nnats: {servers: [\"n:4222\"], monitoringEndpoint: \"n:8222\"}\n", "'/nats/servers/0'"},
		{"two sqlite replicas", "mode: sqlite\nreplicas: 2\n", "replicas"},
		{"sqlite scaled by KEDA", "mode: sqlite\nscaling: {kind: keda}\n", "kind"},
		{"azure without a connection string Secret", "mode: azure\n", "azure.connectionString.secretName is required"},
		{"workload identity without an account", "mode: azure\nazure: {auth: workloadIdentity}\n", "accountName"},
		{"private cloud without its endpoint suffix", "mode: azure\nazure: {connectionString: {secretName: s}, cloud: Private}\n", "endpointSuffix"},
		{"a binding on another backend", "mode: azure\nazure: {connectionString: {secretName: s}}\ntenants: {default: {bindings: {b: {queue: jobs, module: builtin:echo-go, backend: local}}}}\n", `tenants.default.bindings.b.backend: "local"`},
		{"a key the chart owns in config", "config: {admin: {addr: \":1\"}}\n", "admin"},
		{"an unknown value", "replica: 3\n", "replica"},
		{"no grace", "shutdown: {graceSeconds: 0, releaseSeconds: 5, preStopSleepSeconds: 0}\n", "graceSeconds"},
		{"a grace above the host's cap", "shutdown: {graceSeconds: 3601, releaseSeconds: 5, preStopSleepSeconds: 0}\n", "graceSeconds"},
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

// TestChartShutdownGrace: shutdown.graceSeconds is the host's shutdown.grace, and the pod
// is given the preStop sleep, that grace and the release time before it is killed.
func TestChartShutdownGrace(t *testing.T) {
	r, err := render(t, values(t, "mode: sqlite\nshutdown: {graceSeconds: 75, releaseSeconds: 10, preStopSleepSeconds: 2}\n"))
	if err != nil {
		t.Fatal(err)
	}
	cm := r.one(t, "ConfigMap").typed.(*corev1.ConfigMap)
	cfg, err := config.Parse([]byte(cm.Data["wqhost.yaml"]), "/etc/wqhost")
	if err != nil {
		t.Fatalf("wqhost.yaml does not load: %v", err)
	}
	if cfg.Shutdown.Grace != 75*time.Second {
		t.Errorf("wqhost.yaml shutdown.grace %s, want the chart's graceSeconds 75s", cfg.Shutdown.Grace)
	}
	pod := r.one(t, "Deployment").typed.(*appsv1.Deployment).Spec.Template.Spec
	if g := pod.TerminationGracePeriodSeconds; g == nil || *g != 2+75+10 {
		t.Errorf("terminationGracePeriodSeconds %v, want 87 (preStop 2 + grace 75 + release 10)", g)
	}
}
