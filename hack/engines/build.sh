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
# dockerfile-frontend
#            github.com/moby/buildkit frontend/dockerfile/cmd/dockerfile-frontend
#            with the labs channel's tags: the `# syntax=` image of a
#            Dockerfile build (test/engines packs it with hack/ociimage)
# registry   github.com/distribution/distribution/v3 cmd/registry (CNCF
#            distribution), which serves that image on 127.0.0.1
# buildx     github.com/docker/buildx cmd/buildx, the docker CLI plugin
#            `docker build` hands BuildKit builds to
# buildkitd  github.com/moby/buildkit cmd/buildkitd and cmd/buildctl, what a
#            buildx docker-container builder's image runs (test/engines packs
#            them with runc)
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
# The BuildKit that moby v2.0.0-beta.24's go.mod requires: the frontend
# then speaks exactly the gateway API of the daemon's builder.
BUILDKIT_VERSION=${BUILDKIT_VERSION:-v0.33.0}
DISTRIBUTION_VERSION=${DISTRIBUTION_VERSION:-v3.1.2}
BUILDX_VERSION=${BUILDX_VERSION:-v0.38.2}

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

build_dockerfile_frontend() {
	# BuildKit's own Dockerfile (frontend/dockerfile/cmd/dockerfile-frontend)
	# builds the labs channel with the tags listed in the module's
	# frontend/dockerfile/release/labs/tags (read, not assumed: empty in
	# v0.33.0, whose Dockerfile 1.27 has RUN --device in the mainline).
	local pkg=github.com/moby/buildkit dir tags
	dir=$(cd "$BIN" && go mod download -json "$pkg@$BUILDKIT_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
	[ -f "$dir/frontend/dockerfile/release/labs/tags" ] || die "no labs tags file in $pkg@$BUILDKIT_VERSION ($dir)"
	tags=$(cat "$dir/frontend/dockerfile/release/labs/tags")
	# Built inside the module (its go.mod has exclude directives, which
	# `go install MODULE@VERSION` refuses); the module cache is read-only
	# and go build writes nothing there.
	local main=$pkg/frontend/dockerfile/cmd/dockerfile-frontend
	(cd "$dir" && CGO_ENABLED=0 go build -trimpath -tags "$tags netgo static_build osusergo" \
		-ldflags "-s -w -X main.Version=$BUILDKIT_VERSION-labs -X main.Revision=$BUILDKIT_VERSION -X main.Package=$main" \
		-o "$BIN/dockerfile-frontend" ./frontend/dockerfile/cmd/dockerfile-frontend)
}

build_buildkitd() {
	# BuildKit's Dockerfile: static, no cgo, its tags; inside the module
	# for the same reason as the frontend.
	local pkg=github.com/moby/buildkit dir
	dir=$(cd "$BIN" && go mod download -json "$pkg@$BUILDKIT_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
	local ld="-s -w -X $pkg/version.Version=$BUILDKIT_VERSION -X $pkg/version.Revision=$BUILDKIT_VERSION -X $pkg/version.Package=$pkg"
	(cd "$dir" && CGO_ENABLED=0 go build -trimpath -tags "osusergo netgo static_build seccomp" -ldflags "$ld" \
		-o "$BIN/buildkitd" ./cmd/buildkitd &&
		CGO_ENABLED=0 go build -trimpath -ldflags "$ld" -o "$BIN/buildctl" ./cmd/buildctl)
}

build_registry() {
	local pkg=github.com/distribution/distribution/v3
	GOBIN=$BIN CGO_ENABLED=0 go install -trimpath -ldflags "-s -w -X $pkg/version.version=$DISTRIBUTION_VERSION" \
		"$pkg/cmd/registry@$DISTRIBUTION_VERSION"
}

build_buildx() {
	local pkg=github.com/docker/buildx
	GOBIN=$BIN CGO_ENABLED=0 go install -trimpath \
		-ldflags "-s -w -X $pkg/version.Version=$BUILDX_VERSION -X $pkg/version.Package=$pkg" \
		"$pkg/cmd/buildx@$BUILDX_VERSION"
	mv "$BIN/buildx" "$BIN/docker-buildx" # the name the docker CLI looks for
}

[ $# -gt 0 ] || die "usage: build.sh runc|runc-static|containerd|dockerd|dockerfile-frontend|registry|buildx|buildkitd..."
for name in "$@"; do
	case $name in
	runc) build runc "$RUNC_VERSION" build_runc ;;
	runc-static) build runc-static "$RUNC_VERSION" build_runc_static ;;
	containerd) build containerd "$CONTAINERD_VERSION" build_containerd ;;
	# -2: with docker-proxy, which publishes kind's API server port.
	dockerd) build dockerd "$DOCKER_VERSION-2" build_dockerd ;;
	dockerfile-frontend) build dockerfile-frontend "$BUILDKIT_VERSION" build_dockerfile_frontend ;;
	registry) build registry "$DISTRIBUTION_VERSION" build_registry ;;
	buildkitd) build buildkitd "$BUILDKIT_VERSION" build_buildkitd ;;
	buildx) build buildx "$BUILDX_VERSION" build_buildx ;;
	*) die "unknown engine $name: runc, runc-static, containerd, dockerd, dockerfile-frontend, registry, buildx or buildkitd" ;;
	esac
done
