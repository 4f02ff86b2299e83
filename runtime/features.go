package runtime

import (
	"slices"
	"strings"

	"github.com/tetratelabs/wazero"
)

// Optional ABI features a wqhost/v1 module declares with a marker export (docs/abi.md).
const featureHTTPv1 = "wqhost_feature_http_v1"

// supportedFeatures are the feature markers this host knows.
var supportedFeatures = []string{featureHTTPv1}

// checkFeatures returns the problems with a module's feature markers: a module importing the
// outbound HTTP functions must declare wqhost_feature_http_v1 (so a module built for another
// revision of them is refused at load, not at its first request), and a marker this host does
// not know is refused by name. It reports whether the module uses outbound HTTP.
func checkFeatures(cm wazero.CompiledModule) (problems []string, usesHTTP bool) {
	exports := cm.ExportedFunctions()
	for name := range exports {
		if strings.HasPrefix(name, "wqhost_feature_") && !slices.Contains(supportedFeatures, name) {
			problems = append(problems, "declares "+name+"; this host supports "+strings.Join(supportedFeatures, ", "))
		}
	}
	_, declared := exports[featureHTTPv1]
	if def, ok := exports[featureHTTPv1]; ok && (len(def.ParamTypes()) != 0 || len(def.ResultTypes()) != 0) {
		problems = append(problems, "export "+featureHTTPv1+" has signature "+sigString(def.ParamTypes(), def.ResultTypes())+", want ()->()")
	}
	imports := false
	for _, imp := range cm.ImportedFunctions() {
		if mod, fn, _ := imp.Import(); mod == hostModuleName && strings.HasPrefix(fn, "http_") {
			imports = true
			break
		}
	}
	if imports && !declared {
		problems = append(problems, "imports the outbound HTTP functions but does not export "+featureHTTPv1+" (the feature marker)")
	}
	slices.Sort(problems)
	return problems, imports || declared
}
