#!/usr/bin/env bash
# Builds the test cluster's binaries once into the e2e cache and prints
# each one's bin dir, one line per NAME (default: kube):
#
#   hack/kube/build.sh [kube] [release] [cni] [prometheus] [kind] [helm]
#
# kube  one multicall `kube` (main.go: kube-apiserver, kube-scheduler,
#       kube-controller-manager, kubelet, kube-proxy, kubeadm, kubectl, etcd,
#       helm) plus a symlink per command, from this directory's module
#       (k8s.io/kubernetes with its staging modules pinned by replace, etcd's
#       server module, helm v4):
#       $CACHE/engines/kube-v1.37.2-etcd-v3.7.3-helm-v4.3.1-<main.go+go.sum>/bin
# release  kubeadm, kubelet and kubectl as three binaries, as a Kubernetes
#       release's server tarball has them (kind copies each into its node
#       image; three copies of the multicall binary would triple its size):
#       $CACHE/engines/kube-release-v1.37.2-<go.sum>/bin
# cni   the bridge, ptp, host-local, loopback and portmap plugins from
#       github.com/containernetworking/plugins: $CACHE/engines/cni-v1.10.0-2/bin
# kind  the kind CLI and what kind's base and node images hold that Debian
#       does not package, each from its own Go module at the version kind
#       v0.33 or kubeadm v1.37 names: kind, crictl (cri-tools), coredns
#       (kubeadm's CoreDNS version, with only the plugins of kubeadm's
#       Corefile: hack/kind/coredns) and local-path-provisioner (kind's
#       default StorageClass): $CACHE/engines/kind-v0.33.0-.../bin
# helm  helm alone, from this directory's module (what test/chart renders the
#       chart with; a few minutes cold, not Kubernetes' 11-21):
#       $CACHE/engines/helm-v4.3.1-<go.sum>/bin
# prometheus  the Prometheus server, from hack/prometheus's module, with only
#       the Kubernetes service discovery (Debian's package has none):
#       $CACHE/engines/prometheus-v3.16.0/bin
#
# As hack/engines/build.sh: a per-version flock, a temp dir renamed into
# place when complete, so concurrent callers build once. Cold: 11-21 min on
# 2 cores; run it under `nice`. The versions are go.mod's; the names below
# only stamp the binary (`kubectl version`, charts' kubeVersion) and key the
# cache, so change them together with go.mod.
set -euo pipefail

KUBE_VERSION=v1.37.2
ETCD_VERSION=v3.7.3
HELM_VERSION=v4.3.1
CNI_VERSION=${CNI_VERSION:-v1.10.0}
KIND_VERSION=v0.33.0 CRICTL_VERSION=v1.37.0 LPP_VERSION=v0.0.30
# kubeadm v1.37.2's constants.CoreDNSVersion: its `config images list` names it.
COREDNS_VERSION=v1.14.6
# Prometheus' Go module v0.316.0 is its release v3.16.0.
PROM_MODULE=v0.316.0 PROM_VERSION=v3.16.0

here=$(cd "$(dirname "$0")" && pwd)
CACHE=${E2E_CACHE:-/var/cache/wsl-gpu-hook-e2e}
export PATH=/usr/local/go/bin:$PATH
die() { echo "kube: $*" >&2; exit 1; }

for want in "k8s.io/kubernetes $KUBE_VERSION" "go.etcd.io/etcd/server/v3 $ETCD_VERSION" "helm.sh/helm/v4 $HELM_VERSION"; do
	grep -q "^	$want\$" "$here/go.mod" || die "go.mod does not require $want: update build.sh's versions with go.mod"
done
grep -q "^require github.com/prometheus/prometheus $PROM_MODULE\$" "$here/../prometheus/go.mod" ||
	die "hack/prometheus/go.mod does not require prometheus $PROM_MODULE: update build.sh's versions with it"

# kubeld: the linker flags that stamp Kubernetes' version (kubectl version,
# kubeadm's images list, charts' kubeVersion).
kubeld() {
	local minor=${KUBE_VERSION#v1.} pkg
	minor=${minor%%.*}
	ld="-s -w"
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ld+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
		ld+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
	done
}

build_kube() {
	kubeld
	ld+=" -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION"
	(cd "$here" && CGO_ENABLED=0 go build -trimpath -ldflags "$ld" -o "$BIN/kube" .)
	for c in kube-apiserver kube-scheduler kube-controller-manager kubelet kube-proxy kubeadm kubectl etcd helm; do
		ln -s kube "$BIN/$c"
	done
}

build_helm() {
	(cd "$here" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" \
		-o "$BIN/helm" helm.sh/helm/v4/cmd/helm)
}

build_release() {
	kubeld
	local c
	for c in kubeadm kubelet kubectl; do
		(cd "$here" && CGO_ENABLED=0 go build -trimpath -ldflags "$ld" -o "$BIN/$c" "k8s.io/kubernetes/cmd/$c")
	done
}

# sum FILE...: a short digest of files, for cache keys.
sum() { (cd "$here" && cat "$@" | sha256sum | cut -c1-8); }

build_cni() {
	local m=github.com/containernetworking/plugins
	GOBIN=$BIN CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" "$m/plugins/main/bridge@$CNI_VERSION" "$m/plugins/main/ptp@$CNI_VERSION" \
		"$m/plugins/main/loopback@$CNI_VERSION" "$m/plugins/ipam/host-local@$CNI_VERSION" "$m/plugins/meta/portmap@$CNI_VERSION"
}

build_prometheus() {
	local v=github.com/prometheus/common/version
	(cd "$here/../prometheus" && CGO_ENABLED=0 go build -trimpath -tags remove_all_sd,enable_kubernetes_sd \
		-ldflags "-s -w -X $v.Version=${PROM_VERSION#v} -X $v.Branch=release" \
		-o "$BIN/prometheus" github.com/prometheus/prometheus/cmd/prometheus)
}

build_kind() {
	local p
	# One module per `go install`: each builds with its own go.mod's versions.
	for p in "sigs.k8s.io/kind@$KIND_VERSION" "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION" \
		"github.com/rancher/local-path-provisioner@$LPP_VERSION"; do
		GOBIN=$BIN CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" "$p"
	done
	grep -q "^require github.com/coredns/coredns $COREDNS_VERSION\$" "$here/../kind/coredns/go.mod" ||
		die "hack/kind/coredns/go.mod does not require coredns $COREDNS_VERSION: update them together"
	(cd "$here/../kind/coredns" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$BIN/coredns" .)
}

# build NAME DIR FUNC: runs FUNC with $BIN set to a temp bin dir unless
# $CACHE/engines/DIR/bin exists, then prints that bin dir.
build() {
	local name=$1 dest=$CACHE/engines/$2 fn=$3
	mkdir -p "$CACHE/engines"
	exec {lock}>"$dest.lock"
	flock "$lock"
	if [ ! -d "$dest/bin" ]; then
		local tmp start=$SECONDS
		tmp=$(mktemp -d "$dest.tmp.XXXXXX")
		chmod 755 "$tmp"
		BIN=$tmp/bin
		mkdir "$BIN"
		if ! "$fn" >"$tmp/build.log" 2>&1; then
			cat "$tmp/build.log" >&2
			rm -rf "$tmp"
			die "building $name failed (log above)"
		fi
		echo "kube: built $2 in $((SECONDS - start))s" >&2
		rm -rf "$dest"
		mv "$tmp" "$dest"
	fi
	flock -u "$lock"
	exec {lock}>&-
	echo "$dest/bin"
}

[ $# -gt 0 ] || set -- kube
for name in "$@"; do
	case $name in
	kube) build kube "kube-$KUBE_VERSION-etcd-$ETCD_VERSION-helm-$HELM_VERSION-$(sum main.go go.sum)" build_kube ;;
	helm) build helm "helm-$HELM_VERSION-$(sum go.sum)" build_helm ;;
	release) build release "kube-release-$KUBE_VERSION-$(sum go.sum)" build_release ;;
	cni) build cni "cni-$CNI_VERSION-2" build_cni ;;
	prometheus) build prometheus "prometheus-$PROM_VERSION" build_prometheus ;;
	kind) build kind "kind-$KIND_VERSION-crictl-$CRICTL_VERSION-coredns-$COREDNS_VERSION-$(sum ../kind/coredns/main.go ../kind/coredns/go.sum)-lpp-$LPP_VERSION" build_kind ;;
	*) die "unknown NAME $name: kube, release, cni, prometheus, kind or helm" ;;
	esac
done
