package helm

import (
	"encoding/base64"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
)

// cluster answers Helm's lookup from a fake API server holding objs.
type cluster struct{ client dynamic.Interface }

func (c cluster) GetClientFor(apiVersion, kind string) (dynamic.NamespaceableResourceInterface, bool, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, false, err
	}
	return c.client.Resource(gv.WithResource("secrets")), true, nil
}

// TestAdminTokenKeptAcrossUpgrades: the admin token the chart makes on install is kept by
// an upgrade (Prometheus and operators holding it keep working); a fresh install makes a
// long random one.
func TestAdminTokenKeptAcrossUpgrades(t *testing.T) {
	token := func(r rendered) string {
		t.Helper()
		for _, o := range r.find("Secret") {
			if o.name == "demo-wqhost-admin" {
				return string(o.typed.(*corev1.Secret).Data["token"])
			}
		}
		t.Fatal("no admin token Secret rendered")
		return ""
	}
	first, err := render(t, values(t, "mode: sqlite\n"))
	if err != nil {
		t.Fatal(err)
	}
	if tok := token(first); len(tok) < 32 {
		t.Errorf("install: admin token %q, want at least 32 random characters", tok)
	}

	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	existing := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": "demo-wqhost-admin", "namespace": "queues"},
		"data":     map[string]any{"token": base64.StdEncoding.EncodeToString([]byte("the-installed-token"))},
	}}
	fake := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{secrets: "SecretList"}, existing)
	upgraded, err := renderIn(t, values(t, "mode: sqlite\n"), cluster{fake})
	if err != nil {
		t.Fatal(err)
	}
	if got := token(upgraded); got != "the-installed-token" {
		t.Errorf("upgrade: admin token %q, want the installed one kept", got)
	}
}
