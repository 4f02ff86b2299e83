// Package helm renders the wqhost chart (deploy/helm/wqhost) with Helm's own engine
// for each mode and checks every object against the real schemas: Kubernetes objects
// decoded strictly into k8s.io/api types (an unknown field fails), the ServiceMonitor into
// the Prometheus operator's types, the KEDA objects against KEDA's CRD schemas and its
// azure-queue scaler's metadata (both read from the KEDA module pinned in go.mod), and
// the generated wqhost.yaml through wqhost's own config loader.
package helm
