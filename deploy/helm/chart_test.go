package helm

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/host/config"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// values parses a YAML values document (over the chart's values.yaml).
func values(t *testing.T, doc string) map[string]any {
	t.Helper()
	v := map[string]any{}
	if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatalf("test values: %v", err)
	}
	return v
}

// tenantsWithHTTP are bindings in two tenants, one sharded, one calling out over HTTP
// with a credential from a Secret.
const tenantsWithHTTP = `
tenants:
  default:
    bindings:
      billing:
        queue: transactions
        output: priced
        module: builtin:billing-go
  acme:
    token_env: ACME_ADMIN_TOKEN
    bindings:
      hooks:
        queue: hooks
        shards: [hooks-a, hooks-b]
        module: builtin:webhook-delivery-go
        http:
          allow:
            - https://api.example.com/hooks
            - https://*.partner.example:8443
            - http://[10.20.0.0/16]:*
            - https://203.0.113.7
          credentials:
            partner:
              header: Authorization
              value_env: PARTNER_TOKEN
              hosts: [api.example.com]
secretEnv:
  - {name: PARTNER_TOKEN, secretName: partner, key: token}
  - {name: ACME_ADMIN_TOKEN, secretName: acme-admin, key: token}
serviceMonitor: {enabled: true}
networkPolicy: {enabled: true}
`

// modes are the renders every check runs on: each mode, each way of authenticating and
// scaling.
var modes = []struct {
	name, mode, values string
	bindings           []string // tenant/binding the host must run, and no other
}{
	{"sqlite", "sqlite", "mode: sqlite\n", []string{"default/billing"}},
	{"sqlite-everything", "sqlite", "mode: sqlite\n" + tenantsWithHTTP, []string{"acme/hooks", "default/billing"}},
	{"azure-connection-string-keda", "azure", `
mode: azure
azure: {connectionString: {secretName: storage}}
` + tenantsWithHTTP, []string{"acme/hooks", "default/billing"}},
	{"azure-workload-identity-private-cloud", "azure", `
mode: azure
azure: {auth: workloadIdentity, accountName: wqhoststore, clientId: 00000000-0000-0000-0000-000000000001, cloud: Private, endpointSuffix: queue.core.example.net}
scaling: {kind: keda, minReplicas: 0, maxReplicas: 20, keda: {activationQueueLength: 5, queueLengthStrategy: visibleonly}}
`, []string{"default/billing"}},
	{"azure-hpa", "azure", `
mode: azure
azure: {connectionString: {secretName: storage}}
scaling: {kind: hpa, minReplicas: 2, maxReplicas: 6}
shutdown: {graceSeconds: 75, releaseSeconds: 10, preStopSleepSeconds: 0}
tenants: {default: {bindings: {jobs: {queue: jobs, module: builtin:echo-go}}}}
`, []string{"default/jobs"}},
	{"nats-keda", "nats", `
mode: nats
nats: {servers: ["tls://nats.nats:4222"], monitoringEndpoint: "nats.nats:8222", tokenEnv: NATS_TOKEN, caSecret: {name: nats-ca}}
secretEnv: [{name: NATS_TOKEN, secretName: nats, key: token}]
` + tenantsWithHTTP, []string{"acme/hooks", "default/billing"}},
	{"nats-hpa", "nats", `
mode: nats
nats: {servers: ["nats://nats.nats:4222"]}
scaling: {kind: hpa, minReplicas: 2, maxReplicas: 8}
`, []string{"default/billing"}},
	{"azure-long-names", "azure", `
mode: azure
azure: {connectionString: {secretName: storage}}
tenants:
  acmepaymentseurope:
    bindings:
      settlement-reconciliation-nightly-batch-job-a: {queue: settle-a, module: builtin:echo-go}
      settlement-reconciliation-nightly-batch-job-b: {queue: settle-b, module: builtin:echo-go}
  ops-eu: {bindings: {jobs: {queue: run, module: builtin:echo-go}}}
  ops: {bindings: {eu-jobs: {queue: run, module: builtin:echo-go}}}
`, []string{"acmepaymentseurope/settlement-reconciliation-nightly-batch-job-a", "acmepaymentseurope/settlement-reconciliation-nightly-batch-job-b", "ops-eu/jobs", "ops/eu-jobs"}},
	{"sqlite-openshift-hatches", "sqlite", "mode: sqlite\n" + hatches, []string{"default/billing"}},
}

// TestChartRendersStrictly renders every mode and decodes every object strictly into its
// real type (KEDA's against KEDA's CRDs), then checks what a user relies on.
func TestChartRendersStrictly(t *testing.T) {
	total, failures, duplicates := 0, 0, 0
	var modeNames, hpaModes []string
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			r, err := render(t, values(t, m.values))
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			for _, f := range r.failures {
				t.Errorf("strict decode: %s", f)
			}
			total += len(r.objects) + len(r.failures)
			failures += len(r.failures)
			cfg := checkRender(t, m.mode, r)
			duplicates += checkTriggerNames(t, r)
			if len(r.find("HorizontalPodAutoscaler")) > 0 && !slices.Contains(hpaModes, m.mode) {
				hpaModes = append(hpaModes, m.mode)
			}
			var got []string
			for _, b := range bindings(cfg) {
				got = append(got, b.tenant+"/"+b.name)
			}
			slices.Sort(got)
			if !slices.Equal(got, m.bindings) {
				t.Errorf("the host runs bindings %q, want %q", got, m.bindings)
			}
		})
		if !slices.Contains(modeNames, m.mode) {
			modeNames = append(modeNames, m.mode)
		}
	}
	subchart := "ok"
	if err := renderAsDependency(t); err != nil {
		subchart = "failed"
		t.Errorf("as a dependency of an umbrella chart: %v", err)
	}
	slices.Sort(hpaModes)
	fmt.Printf("helm render: modes=%s objects=%d strict-decode-failures=%d subchart=%s hpa-modes=%s duplicate-trigger-names=%d\n",
		strings.Join(modeNames, ","), total, failures, subchart, strings.Join(hpaModes, ","), duplicates)
}

// checkRender checks one render: the config the host will load (returned), the pod's
// probes, grace, security and secrets, scaling, and the network policy.
func checkRender(t *testing.T, mode string, r rendered) *config.Config {
	dep := r.one(t, "Deployment").typed.(*appsv1.Deployment)
	pod := dep.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	// The host checks at load that the variables its config names are set: set those the
	// container gets from Secrets, as the kubelet would.
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			t.Setenv(e.Name, "from-secret-"+e.ValueFrom.SecretKeyRef.Name)
		}
	}
	cm := r.one(t, "ConfigMap").typed.(*corev1.ConfigMap)
	cfgYAML := cm.Data["wqhost.yaml"]
	cfg, err := config.Parse([]byte(cfgYAML), "/etc/wqhost")
	if err != nil {
		t.Fatalf("the ConfigMap's wqhost.yaml does not load in wqhost:\n%v\n%s", err, cfgYAML)
	}
	checkPod(t, cfg, pod, c)
	checkSecrets(t, r, cfg, c, cfgYAML)

	so, hpa := r.find("ScaledObject"), r.find("HorizontalPodAutoscaler")
	if len(so) > 0 && len(hpa) > 0 {
		t.Errorf("a ScaledObject and an HPA both scale the Deployment: never both")
	}
	switch mode {
	case "sqlite":
		if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 1 {
			t.Errorf("sqlite: replicas %v, want 1", dep.Spec.Replicas)
		}
		if dep.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
			t.Errorf("sqlite: strategy %s, want Recreate (never two pods on one store)", dep.Spec.Strategy.Type)
		}
		if len(so)+len(hpa) != 0 {
			t.Errorf("sqlite: %d autoscalers rendered, want none", len(so)+len(hpa))
		}
		pvc := r.one(t, "PersistentVolumeClaim")
		if v := volume(pod, "data"); v == nil || v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != pvc.name {
			t.Errorf("sqlite: the data volume is not the claim %s: %+v", pvc.name, v)
		}
		for _, b := range bindings(cfg) {
			if be, _ := cfg.BackendFor(b.Backend); be.Type != config.BackendLocal {
				t.Errorf("sqlite: binding reads backend %q of type %s, want local", b.Backend, be.Type)
			}
		}
	case "nats":
		if len(so) == 1 {
			checkNATSScaledObject(t, r, cfg)
			checkNATSCA(t, cfg, c)
		} else if len(hpa) != 1 {
			t.Errorf("nats: %d ScaledObjects and %d HPAs, want one of them", len(so), len(hpa))
		}
	case "azure":
		if len(so) == 1 {
			checkScaledObject(t, r, cfg, dep, c)
			if dep.Spec.Replicas != nil {
				t.Errorf("azure with KEDA: the Deployment sets replicas %d, which would fight KEDA on every upgrade", *dep.Spec.Replicas)
			}
		} else if len(hpa) != 1 {
			t.Errorf("azure: %d ScaledObjects and %d HPAs, want one of them", len(so), len(hpa))
		}
		if dep.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
			t.Errorf("azure: strategy %s, want RollingUpdate", dep.Spec.Strategy.Type)
		}
		for _, b := range bindings(cfg) {
			if be, _ := cfg.BackendFor(b.Backend); be.Type != config.BackendAzure {
				t.Errorf("azure: binding reads backend %q of type %s, want azure", b.Backend, be.Type)
			}
		}
	}
	if len(hpa) == 1 {
		checkHPA(t, hpa[0], dep)
	}
	if len(r.find("PodDisruptionBudget")) != 1 {
		t.Errorf("no PodDisruptionBudget")
	}
	if nps := r.find("NetworkPolicy"); len(nps) == 1 {
		checkNetworkPolicy(t, cfg, nps[0])
	}
	return cfg
}

// binding is a config binding with where it lives.
type binding struct {
	tenant, name string
	config.Binding
}

func bindings(cfg *config.Config) []binding {
	var out []binding
	for tn, t := range cfg.Tenants {
		for bn, b := range t.Bindings {
			out = append(out, binding{tn, bn, b})
		}
	}
	return out
}

func volume(pod corev1.PodSpec, name string) *corev1.Volume {
	for i := range pod.Volumes {
		if pod.Volumes[i].Name == name {
			return &pod.Volumes[i]
		}
	}
	return nil
}

// checkPod: probes on the admin API where the host serves it, a grace that covers the
// host's, and a locked-down container.
func checkPod(t *testing.T, cfg *config.Config, pod corev1.PodSpec, c corev1.Container) {
	t.Helper()
	if !strings.HasPrefix(cfg.Admin.Addr, ":") || cfg.Admin.TokenEnv == "" {
		t.Errorf("admin.addr %q token_env %q: want every address (kubelet probes the pod IP) and a token", cfg.Admin.Addr, cfg.Admin.TokenEnv)
	}
	adminPort := ""
	for _, p := range c.Ports {
		if p.Name == "admin" {
			adminPort = fmt.Sprint(p.ContainerPort)
		}
	}
	if ":"+adminPort != cfg.Admin.Addr {
		t.Errorf("container port admin %q, but the host listens on %q", adminPort, cfg.Admin.Addr)
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"startup", c.StartupProbe, "/readyz"}, {"readiness", c.ReadinessProbe, "/readyz"}, {"liveness", c.LivenessProbe, "/healthz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.String() != "admin" {
			t.Errorf("%s probe %+v, want GET %s on the admin port", p.name, p.probe, p.path)
		}
	}
	// The host's shutdown grace is the config's shutdown.grace, which the chart writes from
	// shutdown.graceSeconds: the pod must be given longer than it.
	hostGrace := int64(cfg.Shutdown.Grace / time.Second)
	preStop := int64(0)
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		if c.Lifecycle.PreStop.Sleep == nil {
			t.Errorf("preStop %+v: the image has no shell, want the sleep action", c.Lifecycle.PreStop)
		} else {
			preStop = c.Lifecycle.PreStop.Sleep.Seconds
		}
	}
	if g := pod.TerminationGracePeriodSeconds; g == nil || *g < preStop+hostGrace+1 {
		t.Errorf("terminationGracePeriodSeconds %v: want above preStop %ds + the host's %ds grace", g, preStop, hostGrace)
	}
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container security context %+v: want non-root, read-only root, no privilege escalation, all capabilities dropped", sc)
	}
	// A fixed uid, or none (OpenShift assigns one) with runAsNonRoot.
	if ps := pod.SecurityContext; ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || ps.RunAsUser != nil && *ps.RunAsUser == 0 {
		t.Errorf("pod security context %+v: want runAsNonRoot and no root user", ps)
	}
	for _, v := range pod.Volumes {
		if v.EmptyDir != nil && (v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.IsZero()) {
			t.Errorf("emptyDir %s has no sizeLimit: a runaway cache would fill the node's disk", v.Name)
		}
	}
	mounts := map[string]bool{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = true
	}
	if !mounts[cfg.DataDir] {
		t.Errorf("data_dir %s is not a mounted volume: the root filesystem is read-only", cfg.DataDir)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v: want a CPU request and a memory limit", c.Resources)
	}
}

// checkSecrets: every environment variable the config names comes from a Secret, and no
// Secret's value appears outside Secrets.
func checkSecrets(t *testing.T, r rendered, cfg *config.Config, c corev1.Container, cfgYAML string) {
	t.Helper()
	named := []string{cfg.Admin.TokenEnv}
	for _, be := range cfg.Backends {
		named = append(named, be.ConnectionStringEnv, be.AccountKeyEnv, be.SASURLEnv)
	}
	for _, tn := range cfg.Tenants {
		named = append(named, tn.TokenEnv)
		for _, b := range tn.Bindings {
			for _, cr := range b.HTTP.Credentials {
				named = append(named, cr.ValueEnv)
			}
		}
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	for _, n := range named {
		if n == "" {
			continue
		}
		e, ok := env[n]
		if !ok || e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			t.Errorf("the config names $%s: want it set from a Secret, got %+v", n, e)
		}
	}
	for _, s := range r.find("Secret") {
		for k, v := range s.typed.(*corev1.Secret).Data {
			for _, o := range r.objects {
				if o.kind != "Secret" && strings.Contains(string(o.raw), string(v)) {
					t.Errorf("the value of Secret %s key %s appears in %s %s", s.name, k, o.kind, o.name)
				}
			}
		}
	}
	if strings.Contains(strings.ToLower(cfgYAML), "accountkey=") {
		t.Errorf("a connection string in the ConfigMap")
	}
}
