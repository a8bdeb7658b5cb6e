//go:build tools

// Package prometheus pins the Prometheus server test/k8s runs against the
// chart: hack/kube/build.sh prometheus builds its cmd/prometheus from this
// module, with only the Kubernetes service discovery (build tags
// remove_all_sd,enable_kubernetes_sd). Debian's prometheus package has no
// Kubernetes service discovery at all.
package prometheus

import _ "github.com/prometheus/prometheus/cmd/prometheus"
