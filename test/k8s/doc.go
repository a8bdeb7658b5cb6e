// Package k8s tests wsl-gpu-hook on Kubernetes as people run it: the
// device plugin's image (`make image`) installed with its Helm chart
// (deploy/helm/wsl-gpu-hook, helm v4) on a real v1.37.2 cluster (package
// cluster: API server, scheduler, controller manager, etcd, and nodes that
// each run a kubelet and containerd 2.4 in their own namespaces on a
// simulated WSL host; and nodes inside engine containers, as kind, k3d and
// minikube run them: TestNodeInContainer; and a k3s-shaped node rebooted
// under GPU pods: TestK3sNode), with the cases asserted through
// the API server and from inside the pods. It is a module of its own: nothing here
// touches the main module's dependencies.
//
// TestK8s starts one four-node cluster and runs the suites on it in turn:
// README (the chart's install block of docs/kubernetes.md, run as written), WSLGPU (the
// device plugin) and DRA (the DRA driver). Each suite checks the cluster
// is pristine first and restores it after, so `-run TestK8s/DRA` alone
// works. K8S_BENCH=1 adds DRA's claim to running, stage by stage, against
// the device plugin (60 more pods, about 5 minutes; a benchmark, not a
// check): `K8S_BENCH=1 go test -run 'TestK8s/DRA/claim_to_running' ./`.
//
// Run as root: `make k8s`. The first run builds Kubernetes into
// /var/cache/wsl-gpu-hook-e2e (hack/kube/build.sh).
package k8s
