#!/usr/bin/env bash
# Builds container engines from their Go modules, once, into a cache, and
# prints each one's bin dir (one line per NAME, in order):
#
#   hack/engines/build.sh runc containerd dockerd
#
# runc       github.com/opencontainers/runc (cgo + libseccomp, tag seccomp)
# runc-static the same runc linked statically (libseccomp.a and glibc's
#            static libc, as runc's own `make static`): it runs in a root
#            with no glibc (Alpine's, Rancher Desktop's distro)
# containerd github.com/containerd/containerd/v2: containerd,
#            containerd-shim-runc-v2 and ctr
# dockerd    github.com/moby/moby/v2 cmd/dockerd (the Docker 29 daemon) and
#            cmd/docker-proxy (its userland proxy for published ports)
#
# Each lands in $CACHE/engines/<name>-<version>/bin. A build goes to a temp
# dir renamed into place when complete, under a per-engine flock, so
# concurrent callers build once and nobody sees a half-built dir. Versions
# are pinned (override with RUNC_VERSION etc.): the newest patch of each
# line on the Go proxy when written (`go list -m -versions MODULE`).
set -euo pipefail

RUNC_VERSION=${RUNC_VERSION:-v1.5.2}
CONTAINERD_VERSION=${CONTAINERD_VERSION:-v2.4.2}
# moby's Go module versions are v2.0.0-beta.N; beta.24's
# releases/versions.yaml says docker "last: 29.8.0".
MOBY_VERSION=${MOBY_VERSION:-v2.0.0-beta.24}
DOCKER_VERSION=${DOCKER_VERSION:-29.8.0}

CACHE=${E2E_CACHE:-/var/cache/wsl-gpu-hook-e2e}
export PATH=/usr/local/go/bin:$PATH

die() { echo "engines: $*" >&2; exit 1; }

# build NAME VERSION CMD... : runs CMD with $BIN set to the temp bin dir,
# unless $CACHE/engines/NAME-VERSION/bin exists.
build() {
	local name=$1 version=$2; shift 2
	local dest=$CACHE/engines/$name-$version
	mkdir -p "$CACHE/engines"
	exec {lock}>"$dest.lock"
	flock "$lock"
	if [ ! -d "$dest/bin" ]; then
		local tmp
		tmp=$(mktemp -d "$dest.tmp.XXXXXX")
		chmod 755 "$tmp"
		BIN=$tmp/bin
		mkdir -p "$BIN"
		local start=$SECONDS
		if ! "$@" >"$tmp/build.log" 2>&1; then
			cat "$tmp/build.log" >&2
			rm -rf "$tmp"
			die "building $name $version failed (log above)"
		fi
		echo "engines: built $name $version in $((SECONDS - start))s" >&2
		rm -rf "$dest"
		mv "$tmp" "$dest"
	fi
	flock -u "$lock"
	exec {lock}>&-
	echo "$dest/bin"
}

build_runc() {
	dpkg-query -W -f='${Status}' libseccomp-dev 2>/dev/null | grep -q "install ok installed" ||
		die "runc needs libseccomp-dev (apt-get install libseccomp-dev)"
	# No libpathrs tag: that needs the Rust libpathrs; runc then uses its
	# pure-Go pathrs-lite.
	GOBIN=$BIN CGO_ENABLED=1 go install -trimpath -tags "seccomp urfave_cli_no_docs" -ldflags "-s -w" \
		"github.com/opencontainers/runc@$RUNC_VERSION"
}

build_runc_static() {
	dpkg-query -W -f='${Status}' libseccomp-dev 2>/dev/null | grep -q "install ok installed" ||
		die "runc needs libseccomp-dev (apt-get install libseccomp-dev)"
	# runc's Makefile `static`: netgo osusergo, -extldflags -static.
	GOBIN=$BIN CGO_ENABLED=1 go install -trimpath -tags "seccomp urfave_cli_no_docs netgo osusergo" \
		-ldflags "-s -w -extldflags -static" "github.com/opencontainers/runc@$RUNC_VERSION"
	if file "$BIN/runc" | grep -q 'dynamically linked'; then
		echo "runc-static: $BIN/runc is dynamically linked" >&2
		return 1
	fi
}

build_containerd() {
	local pkg=github.com/containerd/containerd/v2
	local ld="-s -w -X $pkg/version.Version=$CONTAINERD_VERSION -X $pkg/version.Package=$pkg"
	GOBIN=$BIN CGO_ENABLED=0 go install -trimpath -tags "urfave_cli_no_docs no_btrfs" -ldflags "$ld" \
		"$pkg/cmd/containerd@$CONTAINERD_VERSION" "$pkg/cmd/ctr@$CONTAINERD_VERSION"
	GOBIN=$BIN CGO_ENABLED=0 go install -trimpath -tags "urfave_cli_no_docs no_btrfs no_grpc" -ldflags "$ld" \
		"$pkg/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION"
}

build_dockerd() {
	# hack/make.sh's tags; no cgo (btrfs, journald, nftables-cgo and
	# quota drop out), so the daemon needs no -dev packages.
	local pkg=github.com/moby/moby/v2
	GOBIN=$BIN CGO_ENABLED=0 go install -trimpath -tags "netgo osusergo static_build nri_no_wasm" \
		-ldflags "-s -w -X $pkg/dockerversion.Version=$DOCKER_VERSION -X $pkg/dockerversion.GitCommit=$MOBY_VERSION" \
		"$pkg/cmd/dockerd@$MOBY_VERSION" "$pkg/cmd/docker-proxy@$MOBY_VERSION"
}

[ $# -gt 0 ] || die "usage: build.sh runc|runc-static|containerd|dockerd..."
for name in "$@"; do
	case $name in
	runc) build runc "$RUNC_VERSION" build_runc ;;
	runc-static) build runc-static "$RUNC_VERSION" build_runc_static ;;
	containerd) build containerd "$CONTAINERD_VERSION" build_containerd ;;
	# -2: with docker-proxy, which publishes kind's API server port.
	dockerd) build dockerd "$DOCKER_VERSION-2" build_dockerd ;;
	*) die "unknown engine $name: runc, runc-static, containerd or dockerd" ;;
	esac
done
