package helm

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/yaml"
)

// hatches are the escape hatches and the OpenShift security context, with the admin
// port's ingress policy and the PrometheusRule on.
const hatches = `
podSecurityContext: {runAsUser: null, runAsGroup: null, fsGroup: null}
extraEnv:
  - {name: HTTPS_PROXY, value: "http://proxy.corp:3128"}
  - name: POD_NAME
    valueFrom: {fieldRef: {fieldPath: metadata.name}}
envFrom: [{configMapRef: {name: corp-env}}]
priorityClassName: queue-critical
topologySpreadConstraints:
  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}
probes:
  startup: {periodSeconds: 5, failureThreshold: 60, timeoutSeconds: 3}
  readiness: {periodSeconds: 5, failureThreshold: 1, timeoutSeconds: 4}
  liveness: {periodSeconds: 10, failureThreshold: 6, timeoutSeconds: 7}
podAnnotations: {corp.example/team: queues}
podLabels: {corp.example/cost-center: "42"}
emptyDir: {dataSizeLimit: 3Gi, tmpSizeLimit: 64Mi}
networkPolicy:
  enabled: true
  ingress:
    enabled: true
    from: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}}]
prometheusRule: {enabled: true, labels: {release: kube-prometheus}}
`

// checkHPA: the HorizontalPodAutoscaler scales the Deployment, which then sets no replicas
// of its own (an upgrade would reset the HPA's count).
func checkHPA(t *testing.T, o object, dep *appsv1.Deployment) {
	t.Helper()
	hpa := o.typed.(*autoscalingv2.HorizontalPodAutoscaler)
	if ref := hpa.Spec.ScaleTargetRef; ref.Kind != "Deployment" || ref.Name != dep.Name {
		t.Errorf("HPA scales %s %s, want the Deployment %s", ref.Kind, ref.Name, dep.Name)
	}
	if dep.Spec.Replicas != nil {
		t.Errorf("the Deployment sets replicas %d beside an HPA", *dep.Spec.Replicas)
	}
	if hpa.Spec.MinReplicas == nil || *hpa.Spec.MinReplicas < 1 || hpa.Spec.MaxReplicas < *hpa.Spec.MinReplicas {
		t.Errorf("HPA replicas %v..%d", hpa.Spec.MinReplicas, hpa.Spec.MaxReplicas)
	}
}

// checkTriggerNames returns how many of a render's KEDA triggers repeat a name another
// trigger of their ScaledObject has (KEDA refuses the object) or are longer than 63.
func checkTriggerNames(t *testing.T, r rendered) int {
	t.Helper()
	bad := 0
	for _, o := range r.find("ScaledObject") {
		var so struct {
			Spec struct {
				Triggers []struct {
					Name string `json:"name"`
				} `json:"triggers"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(o.raw, &so); err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, tr := range so.Spec.Triggers {
			if tr.Name == "" {
				continue
			}
			if seen[tr.Name] || len(tr.Name) > 63 {
				t.Errorf("ScaledObject %s: trigger name %q repeated or longer than 63", o.name, tr.Name)
				bad++
			}
			seen[tr.Name] = true
		}
	}
	return bad
}

// renderAsDependency renders an umbrella chart, made in a temporary directory, that
// depends on this chart, with global values set as umbrella charts do: Helm checks each
// dependency's values, globals included, against its schema.
func renderAsDependency(t *testing.T) error {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "charts", "wqhost"), os.DirFS(chartDir)); err != nil {
		return err
	}
	files := map[string]string{
		"Chart.yaml": `apiVersion: v2
name: platform
version: 1.0.0
dependencies:
  - name: wqhost
    version: ">=0.1.0"
    repository: file://charts/wqhost
`,
		"values.yaml": `global:
  imageRegistry: registry.corp.example
  storageClass: fast
wqhost:
  mode: sqlite
`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	ch, err := loader.Load(dir)
	if err != nil {
		return err
	}
	caps := chartutil.DefaultCapabilities.Copy()
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		return err
	}
	caps.KubeVersion = *kv
	rv, err := chartutil.ToRenderValues(ch, map[string]any{}, chartutil.ReleaseOptions{Name: "platform", Namespace: "queues", Revision: 1, IsInstall: true}, caps)
	if err != nil {
		return err
	}
	out, err := engine.Render(ch, rv)
	if err != nil {
		return err
	}
	for name, body := range out {
		if strings.HasSuffix(name, "wqhost/templates/deployment.yaml") {
			if !strings.Contains(body, "kind: Deployment") {
				return fmt.Errorf("%s rendered no Deployment", name)
			}
			return nil
		}
	}
	return fmt.Errorf("the dependency rendered no deployment.yaml")
}

// TestChartEscapeHatches: each hatch lands where Kubernetes reads it, and the OpenShift
// security context leaves the ids to the platform while keeping the rest hardened.
func TestChartEscapeHatches(t *testing.T) {
	r, err := render(t, values(t, "mode: sqlite\n"+hatches))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range r.failures {
		t.Errorf("strict decode: %s", f)
	}
	dep := r.one(t, "Deployment").typed.(*appsv1.Deployment)
	pod := dep.Spec.Template.Spec
	c := pod.Containers[0]
	if ps := pod.SecurityContext; ps.RunAsUser != nil || ps.RunAsGroup != nil || ps.FSGroup != nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || ps.SeccompProfile == nil {
		t.Errorf("OpenShift pod security context %+v: want no fixed ids, runAsNonRoot and the seccomp profile kept", ps)
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if env["HTTPS_PROXY"].Value != "http://proxy.corp:3128" || env["POD_NAME"].ValueFrom == nil || env["WQHOST_ADMIN_TOKEN"].ValueFrom == nil {
		t.Errorf("extraEnv not beside the chart's own variables: %+v", c.Env)
	}
	if _, ok := env["GOMEMLIMIT"]; ok {
		t.Errorf("the chart sets GOMEMLIMIT, which switches off the host's own memory limit")
	}
	if len(c.EnvFrom) != 1 || c.EnvFrom[0].ConfigMapRef == nil || c.EnvFrom[0].ConfigMapRef.Name != "corp-env" {
		t.Errorf("envFrom %+v", c.EnvFrom)
	}
	if pod.PriorityClassName != "queue-critical" {
		t.Errorf("priorityClassName %q", pod.PriorityClassName)
	}
	if len(pod.TopologySpreadConstraints) != 1 || pod.TopologySpreadConstraints[0].LabelSelector == nil ||
		pod.TopologySpreadConstraints[0].LabelSelector.MatchLabels["app.kubernetes.io/instance"] != "demo" {
		t.Errorf("topologySpreadConstraints %+v: want the pods' own labels as the selector", pod.TopologySpreadConstraints)
	}
	for name, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		want := map[string]int32{"startup": 3, "readiness": 4, "liveness": 7}[name]
		if p.TimeoutSeconds != want {
			t.Errorf("%s probe timeoutSeconds %d, want %d", name, p.TimeoutSeconds, want)
		}
	}
	meta := dep.Spec.Template.ObjectMeta
	if meta.Annotations["corp.example/team"] != "queues" || meta.Labels["corp.example/cost-center"] != "42" {
		t.Errorf("pod annotations %v labels %v", meta.Annotations, meta.Labels)
	}
	if v := volume(pod, "tmp"); v == nil || v.EmptyDir == nil || v.EmptyDir.SizeLimit.String() != "64Mi" {
		t.Errorf("tmp volume %+v: want an emptyDir of 64Mi", v)
	}
	np := r.one(t, "NetworkPolicy").typed.(*networkingv1.NetworkPolicy)
	if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) || len(np.Spec.Ingress) != 1 ||
		len(np.Spec.Ingress[0].Ports) != 1 || np.Spec.Ingress[0].Ports[0].Port.IntValue() != 8480 || len(np.Spec.Ingress[0].From) != 1 {
		t.Errorf("ingress policy %+v: want the admin port from the one peer given", np.Spec.Ingress)
	}
	pr := r.one(t, "PrometheusRule").typed.(*monitoringv1.PrometheusRule)
	if pr.Labels["release"] != "kube-prometheus" {
		t.Errorf("PrometheusRule labels %v", pr.Labels)
	}

	// Without the hatches: the hardened ids, no ingress side.
	r, err = render(t, values(t, "mode: sqlite\nnetworkPolicy: {enabled: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	ps := r.one(t, "Deployment").typed.(*appsv1.Deployment).Spec.Template.Spec.SecurityContext
	if ps.RunAsUser == nil || *ps.RunAsUser != 65532 || ps.FSGroup == nil {
		t.Errorf("default pod security context %+v: want uid 65532 and its fsGroup", ps)
	}
	if np := r.one(t, "NetworkPolicy").typed.(*networkingv1.NetworkPolicy); slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
		t.Errorf("ingress restricted by default: %v", np.Spec.PolicyTypes)
	}
}

// hostMetrics are the metric names the host exports: the wqhost_ string literals of the
// host package's sources.
func hostMetrics(t *testing.T) []string {
	t.Helper()
	srcs, err := filepath.Glob("../../host/*.go")
	if err != nil || len(srcs) == 0 {
		t.Fatalf("host sources: %v", err)
	}
	var names []string
	re := regexp.MustCompile(`"(wqhost_[a-z_]+)"`)
	for _, f := range srcs {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllSubmatch(b, -1) {
			names = append(names, string(m[1]))
		}
	}
	return names
}

// TestChartPrometheusRule: the alerts an operator needs, each on series the host really
// exports (or kube-state-metrics' HPA series), picking this release's series, in every mode.
func TestChartPrometheusRule(t *testing.T) {
	exported := hostMetrics(t)
	want := []string{"WqhostConfigReloadFailed", "WqhostModuleReloadFailed", "WqhostDeadLettersRising", "WqhostBreakerOpen", "WqhostBacklogGrowingAtMax", "WqhostMemoryNearBudget"}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			r, err := render(t, values(t, m.values+"\nprometheusRule: {enabled: true}\n"))
			if err != nil {
				t.Fatal(err)
			}
			pr := r.one(t, "PrometheusRule").typed.(*monitoringv1.PrometheusRule)
			var alerts []string
			for _, g := range pr.Spec.Groups {
				for _, rule := range g.Rules {
					alerts = append(alerts, rule.Alert)
					expr := rule.Expr.String()
					if strings.Count(expr, "(") != strings.Count(expr, ")") || strings.Count(expr, "{") != strings.Count(expr, "}") {
						t.Errorf("%s: unbalanced expression %q", rule.Alert, expr)
					}
					if !strings.Contains(expr, `namespace="queues"`) {
						t.Errorf("%s: %q does not pick the release's namespace", rule.Alert, expr)
					}
					for _, name := range regexp.MustCompile(`\b(wqhost_[a-z_]+|kube_[a-z_]+)`).FindAllString(expr, -1) {
						if strings.HasPrefix(name, "wqhost_") && !slices.Contains(exported, name) {
							t.Errorf("%s: the host exports no %s", rule.Alert, name)
						}
					}
				}
			}
			if !slices.Equal(alerts, want) {
				t.Errorf("alerts %q, want %q", alerts, want)
			}
		})
	}
}

// TestChartRestartChecksum: the pods roll (checksum/restart-config changes) for what only a
// restart applies, and not for what the host reloads: tenants, max_concurrency, log.level.
func TestChartRestartChecksum(t *testing.T) {
	sum := func(vals string) string {
		t.Helper()
		r, err := render(t, values(t, vals))
		if err != nil {
			t.Fatal(err)
		}
		return r.one(t, "Deployment").typed.(*appsv1.Deployment).Spec.Template.Annotations["checksum/restart-config"]
	}
	base := sum("config: {log: {format: json, level: info}}\n")
	for _, tc := range []struct {
		vals  string
		rolls bool
	}{
		{"config: {log: {format: json, level: debug}}\n", false},
		{"config: {log: {format: json, level: info}, max_concurrency: 8}\n", false},
		{"config: {log: {format: json, level: info}}\ntenants: {default: {bindings: {jobs: {queue: jobs, module: builtin:echo-go}}}}\n", false},
		{"config: {log: {format: text, level: info}}\n", true},
		{"config: {log: {format: json, level: info}}\nsqlite: {sync: normal}\n", true},
	} {
		if got := sum(tc.vals) != base; got != tc.rolls {
			t.Errorf("%q: pods roll %v, want %v", tc.vals, got, tc.rolls)
		}
	}
}

// notes renders the chart's NOTES.txt with vals.
func notes(t *testing.T, vals map[string]any) string {
	t.Helper()
	ch := loadChart(t)
	caps := chartutil.DefaultCapabilities.Copy()
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	caps.KubeVersion = *kv
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: "demo", Namespace: "queues", Revision: 1, IsInstall: true}, caps)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.Render(ch, rv)
	if err != nil {
		t.Fatal(err)
	}
	return files["wqhost/templates/NOTES.txt"]
}

// TestChartNotes: the install notes name the scaling in effect in every mode, and the
// console.
func TestChartNotes(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			r, err := render(t, values(t, m.values))
			if err != nil {
				t.Fatal(err)
			}
			want := "Scaling: none"
			switch {
			case len(r.find("ScaledObject")) > 0:
				want = "Scaling: keda (kubectl get scaledobject demo-wqhost)"
			case len(r.find("HorizontalPodAutoscaler")) > 0:
				want = "Scaling: hpa (kubectl get hpa demo-wqhost)"
			}
			n := notes(t, values(t, m.values))
			if !strings.Contains(n, want) || !strings.Contains(n, "/console/") {
				t.Errorf("NOTES lack %q or the console:\n%s", want, n)
			}
		})
	}
}
