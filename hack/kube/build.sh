#!/usr/bin/env bash
# Builds the test cluster's binaries once into the e2e cache and prints
# each one's bin dir, one line per NAME (default: kube):
#
#   hack/kube/build.sh [kube] [cni] [prometheus]
#
# kube  one multicall `kube` (main.go: kube-apiserver, kube-scheduler,
#       kube-controller-manager, kubelet, kubectl, etcd, helm) plus a symlink
#       per command, from this directory's module (k8s.io/kubernetes with its
#       staging modules pinned by replace, etcd's server module, helm v4):
#       $CACHE/engines/kube-v1.37.2-etcd-v3.7.3-helm-v4.3.1/bin
# cni   the bridge, host-local, loopback and portmap plugins from
#       github.com/containernetworking/plugins: $CACHE/engines/cni-v1.10.0/bin
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

build_kube() {
	minor=${KUBE_VERSION#v1.}
	minor=${minor%%.*}
	ld="-s -w"
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ld+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
		ld+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
	done
	ld+=" -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION"
	(cd "$here" && CGO_ENABLED=0 go build -trimpath -ldflags "$ld" -o "$BIN/kube" .)
	for c in kube-apiserver kube-scheduler kube-controller-manager kubelet kubectl etcd helm; do
		ln -s kube "$BIN/$c"
	done
}

build_cni() {
	local m=github.com/containernetworking/plugins
	GOBIN=$BIN CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" "$m/plugins/main/bridge@$CNI_VERSION" \
		"$m/plugins/main/loopback@$CNI_VERSION" "$m/plugins/ipam/host-local@$CNI_VERSION" "$m/plugins/meta/portmap@$CNI_VERSION"
}

build_prometheus() {
	local v=github.com/prometheus/common/version
	(cd "$here/../prometheus" && CGO_ENABLED=0 go build -trimpath -tags remove_all_sd,enable_kubernetes_sd \
		-ldflags "-s -w -X $v.Version=${PROM_VERSION#v} -X $v.Branch=release" \
		-o "$BIN/prometheus" github.com/prometheus/prometheus/cmd/prometheus)
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
	kube) build kube "kube-$KUBE_VERSION-etcd-$ETCD_VERSION-helm-$HELM_VERSION" build_kube ;;
	cni) build cni "cni-$CNI_VERSION" build_cni ;;
	prometheus) build prometheus "prometheus-$PROM_VERSION" build_prometheus ;;
	*) die "unknown NAME $name: kube, cni or prometheus" ;;
	esac
done
