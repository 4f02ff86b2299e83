//go:build tools

// The KEDA module is required for its CRDs and scaler source, which the chart tests read
// from the module cache (kedaDir); its Go packages are not compiled.
package helm

import _ "github.com/kedacore/keda/v2/apis/keda/v1alpha1"
