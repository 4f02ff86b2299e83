package helm

import (
	"bytes"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// chartDir is the chart under test.
const chartDir = "wqhost"

// kubeVersion is the cluster version the chart is rendered for: the oldest it supports.
const kubeVersion = "v1.30.0"

// object is one rendered manifest: where it came from, its kind, and the typed value it
// decoded into (nil for the KEDA kinds, checked against KEDA's CRD schemas instead).
type object struct {
	source, apiVersion, kind, name string
	raw                            []byte
	typed                          any
}

// rendered is one render of the chart.
type rendered struct {
	objects []object
	// failures are the documents that did not decode strictly.
	failures []string
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load %s: %v", chartDir, err)
	}
	return ch
}

// render renders the chart with vals over its values.yaml, as `helm install` would (the
// values checked against values.schema.json first), and decodes every document strictly.
func render(t *testing.T, vals map[string]any) (rendered, error) {
	t.Helper()
	return renderIn(t, vals, nil)
}

// renderIn renders as render does, against a cluster whose objects cluster's clients
// return (Helm's lookup); nil: no cluster, as `helm template`.
func renderIn(t *testing.T, vals map[string]any, cluster engine.ClientProvider) (rendered, error) {
	t.Helper()
	ch := loadChart(t)
	caps := chartutil.DefaultCapabilities.Copy()
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	caps.KubeVersion = *kv
	if !chartutil.IsCompatibleRange(ch.Metadata.KubeVersion, kubeVersion) {
		t.Fatalf("chart kubeVersion %q excludes %s", ch.Metadata.KubeVersion, kubeVersion)
	}
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{
		Name: "demo", Namespace: "queues", Revision: 1, IsInstall: true,
	}, caps)
	if err != nil {
		return rendered{}, err
	}
	var files map[string]string
	if cluster != nil {
		files, err = engine.RenderWithClientProvider(ch, rv, cluster)
	} else {
		files, err = engine.Render(ch, rv)
	}
	if err != nil {
		return rendered{}, err
	}
	var r rendered
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if filepath.Ext(name) != ".yaml" {
			continue
		}
		for i, doc := range splitDocs(files[name]) {
			o, err := decodeStrict(doc)
			o.source = fmt.Sprintf("%s#%d", name, i)
			if err != nil {
				r.failures = append(r.failures, fmt.Sprintf("%s: %v", o.source, err))
				continue
			}
			r.objects = append(r.objects, o)
		}
	}
	return r, nil
}

// splitDocs splits a rendered file into its YAML documents, leaving out empty ones.
func splitDocs(s string) [][]byte {
	var docs [][]byte
	for _, d := range strings.Split("\n"+s, "\n---") {
		b := []byte(d)
		if len(bytes.TrimSpace(stripComments(b))) > 0 {
			docs = append(docs, b)
		}
	}
	return docs
}

func stripComments(b []byte) []byte {
	var out []byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(l), []byte("#")) {
			out = append(out, l...)
			out = append(out, '\n')
		}
	}
	return out
}

// decodeStrict decodes doc into the Go type of its kind: an unknown or duplicate field, a
// wrong type or an unknown kind is an error.
func decodeStrict(doc []byte) (object, error) {
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(doc, &meta); err != nil {
		return object{}, fmt.Errorf("not YAML: %w", err)
	}
	o := object{apiVersion: meta.APIVersion, kind: meta.Kind, name: meta.Metadata.Name, raw: doc}
	var typed any
	switch meta.APIVersion + " " + meta.Kind {
	case "v1 ConfigMap":
		typed = &corev1.ConfigMap{}
	case "v1 Secret":
		typed = &corev1.Secret{}
	case "v1 Service":
		typed = &corev1.Service{}
	case "v1 ServiceAccount":
		typed = &corev1.ServiceAccount{}
	case "v1 PersistentVolumeClaim":
		typed = &corev1.PersistentVolumeClaim{}
	case "apps/v1 Deployment":
		typed = &appsv1.Deployment{}
	case "policy/v1 PodDisruptionBudget":
		typed = &policyv1.PodDisruptionBudget{}
	case "autoscaling/v2 HorizontalPodAutoscaler":
		typed = &autoscalingv2.HorizontalPodAutoscaler{}
	case "networking.k8s.io/v1 NetworkPolicy":
		typed = &networkingv1.NetworkPolicy{}
	case "monitoring.coreos.com/v1 ServiceMonitor":
		typed = &monitoringv1.ServiceMonitor{}
	case "monitoring.coreos.com/v1 PrometheusRule":
		typed = &monitoringv1.PrometheusRule{}
	case "keda.sh/v1alpha1 ScaledObject", "keda.sh/v1alpha1 TriggerAuthentication":
		return o, checkKEDA(o)
	default:
		return o, fmt.Errorf("kind %s %s: no schema to check it against", meta.APIVersion, meta.Kind)
	}
	if err := yaml.UnmarshalStrict(doc, typed); err != nil {
		return o, fmt.Errorf("%s %s: %w", meta.Kind, meta.Metadata.Name, err)
	}
	o.typed = typed
	return o, nil
}

// find returns the rendered objects of kind.
func (r rendered) find(kind string) []object {
	var out []object
	for _, o := range r.objects {
		if o.kind == kind {
			out = append(out, o)
		}
	}
	return out
}

// one returns the one object of kind, failing the test if there is not exactly one.
func (r rendered) one(t *testing.T, kind string) object {
	t.Helper()
	os := r.find(kind)
	if len(os) != 1 {
		t.Fatalf("%d objects of kind %s rendered, want 1", len(os), kind)
	}
	return os[0]
}
