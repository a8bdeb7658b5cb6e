#!/usr/bin/env bash
# Builds the test cluster's binary once into the e2e cache and prints its
# bin dir: one multicall `kube` (main.go: kube-apiserver, kube-scheduler,
# kube-controller-manager, kubelet, kubectl, etcd, helm) plus a symlink per
# command, from this directory's module (k8s.io/kubernetes with its staging
# modules pinned by replace, etcd's server module, helm v4).
#
#   hack/kube/build.sh    ->  /var/cache/wsl-gpu-hook-e2e/engines/kube-v1.37.2-etcd-v3.7.3-helm-v4.3.1/bin
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

here=$(cd "$(dirname "$0")" && pwd)
CACHE=${E2E_CACHE:-/var/cache/wsl-gpu-hook-e2e}
export PATH=/usr/local/go/bin:$PATH
die() { echo "kube: $*" >&2; exit 1; }

for want in "k8s.io/kubernetes $KUBE_VERSION" "go.etcd.io/etcd/server/v3 $ETCD_VERSION" "helm.sh/helm/v4 $HELM_VERSION"; do
	grep -q "^	$want\$" "$here/go.mod" || die "go.mod does not require $want: update build.sh's versions with go.mod"
done

dest=$CACHE/engines/kube-$KUBE_VERSION-etcd-$ETCD_VERSION-helm-$HELM_VERSION
mkdir -p "$CACHE/engines"
exec {lock}>"$dest.lock"
flock "$lock"
if [ ! -x "$dest/bin/kube" ]; then
	tmp=$(mktemp -d "$dest.tmp.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	chmod 755 "$tmp"
	mkdir "$tmp/bin"
	minor=${KUBE_VERSION#v1.}
	minor=${minor%%.*}
	ld="-s -w"
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ld+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
		ld+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
	done
	ld+=" -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION"
	start=$SECONDS
	if ! (cd "$here" && CGO_ENABLED=0 go build -trimpath -ldflags "$ld" -o "$tmp/bin/kube" .) >"$tmp/build.log" 2>&1; then
		cat "$tmp/build.log" >&2
		die "building kube $KUBE_VERSION failed (log above)"
	fi
	for c in kube-apiserver kube-scheduler kube-controller-manager kubelet kubectl etcd helm; do
		ln -s kube "$tmp/bin/$c"
	done
	echo "kube: built $KUBE_VERSION, etcd $ETCD_VERSION, helm $HELM_VERSION in $((SECONDS - start))s" >&2
	rm -rf "$dest"
	mv "$tmp" "$dest"
	trap - EXIT
fi
flock -u "$lock"
echo "$dest/bin"
