package helm

import (
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestDocsWorkInFlightTrigger: the extraTriggers example of docs/deploy.md ("Scaling on
// work in flight") renders in mode azure into a ScaledObject that KEDA's CRD and its
// prometheus scaler accept, beside the azure-queue trigger that wakes the first replica,
// and its query scales on the visible and leased states of wqhost_queue_messages.
func TestDocsWorkInFlightTrigger(t *testing.T) {
	doc, err := os.ReadFile("../../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "### Scaling on work in flight")
	if !ok {
		t.Fatal(`docs/deploy.md has no "### Scaling on work in flight" section`)
	}
	_, block, ok := strings.Cut(section, "```yaml\n")
	block, _, closed := strings.Cut(block, "```")
	if !ok || !closed {
		t.Fatal("the section has no yaml example")
	}
	vals := values(t, "mode: azure\nazure: {connectionString: {secretName: storage}}\n")
	for k, v := range values(t, block) {
		vals[k] = v
	}
	r, err := render(t, vals)
	if err != nil {
		t.Fatalf("render with the documented extraTriggers: %v\n%s", err, block)
	}
	for _, f := range r.failures {
		t.Errorf("strict decode: %s", f)
	}
	var so scaledObject
	if err := yaml.Unmarshal(r.one(t, "ScaledObject").raw, &so); err != nil {
		t.Fatal(err)
	}
	types := map[string]int{}
	for _, tr := range so.Spec.Triggers {
		types[tr.Type]++
		if tr.Type != "prometheus" {
			continue
		}
		q := tr.Metadata["query"]
		if !strings.Contains(q, "wqhost_queue_messages") || !strings.Contains(q, `state=~"visible|leased"`) {
			t.Errorf("prometheus query %q: want wqhost_queue_messages' visible and leased states", q)
		}
	}
	if types["prometheus"] != 1 || types["azure-queue"] == 0 {
		t.Errorf("triggers %v: want the documented prometheus trigger beside azure-queue", types)
	}
}

// TestDocsValuesAzure: the values-azure.yaml of docs/deploy.md, section 3, installs as
// pasted (no placeholder the schema refuses).
func TestDocsValuesAzure(t *testing.T) {
	doc, err := os.ReadFile("../../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(doc), "cat > values-azure.yaml <<'YAML'\n")
	block, _, closed := strings.Cut(block, "\nYAML\n")
	if !ok || !closed {
		t.Fatal("docs/deploy.md has no values-azure.yaml heredoc")
	}
	r, err := render(t, values(t, block))
	if err != nil {
		t.Fatalf("the documented values-azure.yaml does not render: %v\n%s", err, block)
	}
	for _, f := range r.failures {
		t.Errorf("strict decode: %s", f)
	}
	if len(r.find("ScaledObject")) != 1 {
		t.Errorf("the documented values-azure.yaml renders no ScaledObject")
	}
}
