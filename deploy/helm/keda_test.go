package helm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// kedaModule is the KEDA module whose CRDs and scaler source the KEDA objects are checked
// against: the version pinned in go.mod (tools.go), read from the module cache.
const kedaModule = "github.com/kedacore/keda/v2"

// keda is what the checks read from the KEDA module, loaded once per test binary.
type keda struct {
	version string
	schemas map[string]*jsonschema.Schema // by kind
	// scalers are the metadata of the triggers the chart and its docs use (azure-queue,
	// prometheus), by type: every key each reads, which of them are required and which take
	// a fixed set of values.
	scalers map[string]scalerMeta
}

type scalerMeta struct {
	keys     []string
	required []string
	enums    map[string][]string
}

var loadKEDA = sync.OnceValues(func() (*keda, error) {
	out, err := exec.Command("go", "mod", "download", "-json", kedaModule).Output()
	if err != nil {
		return nil, fmt.Errorf("go mod download %s: %w", kedaModule, err)
	}
	var mod struct{ Dir, Version string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return nil, fmt.Errorf("go mod download %s: no directory in %s", kedaModule, out)
	}
	k := &keda{version: mod.Version, schemas: map[string]*jsonschema.Schema{}, scalers: map[string]scalerMeta{}}
	for kind, file := range map[string]string{
		"ScaledObject":          "keda.sh_scaledobjects.yaml",
		"TriggerAuthentication": "keda.sh_triggerauthentications.yaml",
	} {
		s, err := crdSchema(filepath.Join(mod.Dir, "config/crd/bases", file), "v1alpha1")
		if err != nil {
			return nil, err
		}
		k.schemas[kind] = s
	}
	for typ, src := range map[string][2]string{
		"azure-queue":    {"azure_queue_scaler.go", "azureQueueMetadata"},
		"prometheus":     {"prometheus_scaler.go", "prometheusMetadata"},
		"nats-jetstream": {"nats_jetstream_scaler.go", "natsJetStreamMetadata"},
	} {
		if k.scalers[typ], err = parseScalerMeta(filepath.Join(mod.Dir, "pkg/scalers", src[0]), src[1]); err != nil {
			return nil, err
		}
	}
	return k, nil
})

// crdSchema compiles a CRD version's openAPIV3Schema, made strict as the API server's
// strict field validation is: an object schema that lists its properties rejects others
// (unless it preserves unknown fields).
func crdSchema(path, version string) (*jsonschema.Schema, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("KEDA CRD: %w", err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Name   string `json:"name"`
				Schema struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &crd); err != nil {
		return nil, fmt.Errorf("KEDA CRD %s: %w", path, err)
	}
	for _, v := range crd.Spec.Versions {
		if v.Name != version {
			continue
		}
		s := v.Schema.OpenAPIV3Schema
		tighten(s)
		c := jsonschema.NewCompiler()
		url := "mem://keda/" + filepath.Base(path) + "/" + version + ".json"
		if err := c.AddResource(url, s); err != nil {
			return nil, fmt.Errorf("KEDA CRD %s: %w", path, err)
		}
		return c.Compile(url)
	}
	return nil, fmt.Errorf("KEDA CRD %s: no version %s", path, version)
}

func tighten(v any) {
	switch s := v.(type) {
	case map[string]any:
		if _, ok := s["properties"]; ok {
			if _, set := s["additionalProperties"]; !set && s["x-kubernetes-preserve-unknown-fields"] != true {
				s["additionalProperties"] = false
			}
		}
		for _, c := range s {
			tighten(c)
		}
	case []any:
		for _, c := range s {
			tighten(c)
		}
	}
}

// parseScalerMeta reads the keda:"name=…, order=…" tags of a scaler's metadata struct:
// the keys the scaler reads, those with neither "optional" nor a default (required), and
// enums. A key read from the environment (order resolvedEnv) may also be given as
// <key>FromEnv; a scaler that parses a storage endpoint suffix also reads "cloud".
func parseScalerMeta(path, structName string) (scalerMeta, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return scalerMeta{}, fmt.Errorf("KEDA scaler: %w", err)
	}
	start := bytes.Index(b, []byte("type "+structName+" struct {"))
	if start < 0 {
		return scalerMeta{}, fmt.Errorf("KEDA scaler %s: no struct %s", path, structName)
	}
	body := b[start:]
	body = body[:bytes.Index(body, []byte("\n}"))]
	m := scalerMeta{enums: map[string][]string{}}
	for _, tag := range regexp.MustCompile("keda:\"([^\"]*)\"").FindAllSubmatch(body, -1) {
		params := map[string]string{}
		for _, p := range strings.Split(string(tag[1]), ",") {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			params[k] = v
		}
		name := params["name"]
		if name == "" {
			continue // a field filled from elsewhere (prometheus' authentication)
		}
		m.keys = append(m.keys, name)
		if strings.Contains(params["order"], "resolvedEnv") {
			m.keys = append(m.keys, name+"FromEnv")
		}
		if _, opt := params["optional"]; !opt && params["default"] == "" {
			m.required = append(m.required, name)
		}
		if e := params["enum"]; e != "" {
			m.enums[name] = strings.Split(e, ";")
		}
	}
	if bytes.Contains(b, []byte("ParseAzureStorageEndpointSuffix(config.TriggerMetadata")) {
		m.keys = append(m.keys, "cloud")
	}
	if len(m.keys) == 0 {
		return m, fmt.Errorf("KEDA scaler %s: no keda tags in %s", path, structName)
	}
	return m, nil
}

// checkKEDA validates a KEDA object against its CRD schema, its metadata strictly as
// ObjectMeta, and each azure-queue and prometheus trigger's metadata against what the
// scaler reads.
func checkKEDA(o object) error {
	k, err := loadKEDA()
	if err != nil {
		return err
	}
	js, err := yaml.YAMLToJSON(o.raw)
	if err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
	if err != nil {
		return err
	}
	if err := k.schemas[o.kind].Validate(inst); err != nil {
		return fmt.Errorf("%s %s against KEDA %s's CRD: %#v", o.kind, o.name, k.version, err)
	}
	var obj struct {
		Spec struct {
			Triggers []struct {
				Type     string            `json:"type"`
				Metadata map[string]string `json:"metadata"`
			} `json:"triggers"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(js, &obj); err != nil {
		return err
	}
	var meta metav1.ObjectMeta
	var loose map[string]json.RawMessage
	if err := json.Unmarshal(js, &loose); err != nil {
		return err
	}
	if err := yaml.UnmarshalStrict(loose["metadata"], &meta); err != nil {
		return fmt.Errorf("%s %s metadata: %w", o.kind, o.name, err)
	}
	for i, tr := range obj.Spec.Triggers {
		aq, ok := k.scalers[tr.Type]
		if !ok {
			continue
		}
		for key, v := range tr.Metadata {
			if !slices.Contains(aq.keys, key) {
				return fmt.Errorf("%s %s trigger %d: %s reads no metadata %q (KEDA %s reads %s)", o.kind, o.name, i, tr.Type, key, k.version, strings.Join(aq.keys, ", "))
			}
			if e := aq.enums[key]; e != nil && !slices.Contains(e, v) {
				return fmt.Errorf("%s %s trigger %d: %s %q is not one of %s", o.kind, o.name, i, key, v, strings.Join(e, ", "))
			}
		}
		for _, key := range aq.required {
			if _, ok := tr.Metadata[key]; !ok {
				return fmt.Errorf("%s %s trigger %d: %s needs %q", o.kind, o.name, i, tr.Type, key)
			}
		}
	}
	return nil
}
