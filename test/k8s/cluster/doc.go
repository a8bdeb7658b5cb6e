// Package cluster runs a real Kubernetes cluster on one machine for tests:
// etcd 3.7, kube-apiserver, kube-scheduler and kube-controller-manager
// v1.37.2 on the host (the API server on a bridge the nodes reach), and
// nodes that are each a kubelet and a containerd 2.4 in their own network
// namespace and private mount namespace, with private /run, /var/lib,
// /var/log and /etc, their own cgroup root and, for a node with a
// simulated WSL host profile, its own /dev/dxg (test/dxgsim) and
// /usr/lib/wsl (test/fixture). Nothing a node does reaches the machine:
// hostPath volumes, CNI state, kubelet state and CDI specs all land in the
// node's private mounts. A process holds each node's network namespace (no
// /run/netns name), and Start fails the test if the host's mount table
// gained a mount when the nodes are Ready or after teardown, so tests that
// check the host's mounts can run beside a cluster, and two clusters (own
// bridge wgkNbr, 10.250.N.0/24, dir and cgroup roots) beside each other.
//
// Binaries come from hack/kube/build.sh (one multicall binary: the control
// plane, kubelet, kubectl, etcd, helm; and the CNI plugins) and
// hack/engines/build.sh (containerd), both cached by version under
// /var/cache/wsl-gpu-hook-e2e: the first run builds Kubernetes (11-21
// minutes on 2 cores), later ones reuse it.
//
// Use:
//
//	c := cluster.Start(t, cluster.Options{Nodes: []cluster.NodeSpec{
//		{Name: "laptop", Profile: "nvidia-laptop"},
//		{Name: "desktop", Profile: "amd-desktop"},
//	}, Images: []string{"my-image.tar"}})
//	c.Apply(manifest)
//	out := c.MustKubectl("logs", "pod/x")
//
// Every node has PauseImage and TestImage (busybox, glibc, cudaprobe). Pods
// get a bridge network per node (10.244.N.0/24) with no cross-node
// routes, no DNS and no kube-proxy; each node forwards the kubernetes
// Service's address (ServiceIP:443) to the API server, so in-cluster
// clients work. Node.Restart restarts a node's containerd or kubelet;
// Node.Reboot does what a reboot does (the daemons and every container
// stop, /run, which is /var/run, emptied, /var/lib and /etc kept, the
// daemons started again); Node.Exec runs a command inside the node.
//
// A node with NodeSpec.K3s runs as a k3s agent does, since k3s itself
// cannot be built here (the module proxy refuses github.com/k3s-io/k3s):
// containerd 2.4 with a configuration in the shape of k3s's v3 template,
// written to /var/lib/rancher/k3s/agent/etc/containerd/config.toml at every
// start, its state and socket under /run/k3s/containerd, its root under
// /var/lib/rancher/k3s/agent, and the kubelet on that socket. Everything stops and is removed
// in the test's cleanup (K8S_TEST_KEEP=1 keeps the dir and its logs).
//
// Cluster.StartContainerNode adds a node the way kind, k3d and minikube's
// docker driver make one: a privileged container of a real engine (the
// Docker 29 daemon, or Debian 13's podman 5.4) running under dxgsim in a
// network namespace on the cluster's bridge, started from NodeImage (a
// Debian 13 root with containerd 2.4, runc 1.5, the CNI plugins and the
// kubelet; loaded with `docker load`/`podman load`) with the flags that ask
// for the GPU; its containerd and kubelet join the API server, and the
// cluster's images are imported inside it as `kind load image-archive`
// does.
package cluster
