#!/usr/bin/env bash
# Builds the deb, rpm and apk packages of one architecture from the one
# description, packaging/nfpm.yaml (nfpm v2, driven by hack/release):
#   hack/packages.sh OUTDIR ARCH [FORMAT...]   ARCH: amd64, arm64; FORMAT: deb rpm apk (default all)
# and prints each package's path. VERSION overrides `git describe --tags
# --always --dirty`, which the binaries carry and each format's version is
# mapped from (hack/release/version). Every time in the packages is
# SOURCE_DATE_EPOCH, by default the commit's: the same commit gives the same
# bytes. RELEASE_TOOL names an already built hack/release, BINDIR already
# built binaries of ARCH (hack/release.sh, which has their SBOMs).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH

[ $# -ge 2 ] || { echo "usage: hack/packages.sh OUTDIR ARCH [deb] [rpm] [apk]" >&2; exit 2; }
out=$1 arch=$2
shift 2
formats=("$@")
[ ${#formats[@]} -gt 0 ] || formats=(deb rpm apk)
case $arch in
amd64 | arm64) ;;
*) echo "packages: architecture $arch: want amd64 or arm64" >&2; exit 2 ;;
esac
command -v go >/dev/null || { echo "packages: go is not installed" >&2; exit 1; }

describe=${VERSION:-$(git describe --tags --always --dirty)}
count=$(git rev-list --count HEAD)
commit=$(git rev-parse --short HEAD)
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tool=${RELEASE_TOOL:-}
if [ -z "$tool" ]; then
	tool=$work/release
	go build -C hack/release -o "$tool" .
fi
eval "$("$tool" version -describe "$describe" -count "$count")" # deb= rpm= apk= semver=

# The staged files, at the paths packaging/nfpm.yaml takes them from.
stage=$work/stage
install -d -m 0755 "$stage/usr/bin" "$stage/usr/lib/systemd/system" "$stage/usr/share/man/man1" "$stage/usr/share/doc/wsl-gpu-hook"
flags=(-trimpath -buildvcs=false -ldflags "-s -w -buildid= -X main.version=$describe")
for cmd in wsl-gpu-hook wsl-gpu-ctl; do
	if [ -n "${BINDIR:-}" ]; then
		install -m 0755 "$BINDIR/$cmd" "$stage/usr/bin/$cmd"
	else
		CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build "${flags[@]}" -o "$stage/usr/bin/$cmd" ./cmd/$cmd
	fi
done
# The hooks.d file exactly as `wsl-gpu-hook install podman` writes it,
# written by a build for this machine (the staged one may be another arch's;
# the hook runs the wsl-gpu-ctl next to it).
host=$stage/usr/bin
if [ "$arch" != "$(go env GOHOSTARCH)" ]; then
	host=$work/host
	for cmd in wsl-gpu-hook wsl-gpu-ctl; do
		CGO_ENABLED=0 go build "${flags[@]}" -o "$host/$cmd" ./cmd/$cmd
	done
fi
"$host/wsl-gpu-hook" install --prefix "$stage" --hook /usr/bin/wsl-gpu-hook podman >/dev/null
sed -e 's|/usr/local/bin/wsl-gpu-hook|/usr/bin/wsl-gpu-hook|g' -e 's|^\[Unit\]$|[Unit]\nDocumentation=man:wsl-gpu-hook(1)|' \
	config/systemd/wsl-gpu-hook-cdi.service >"$stage/usr/lib/systemd/system/wsl-gpu-hook-cdi.service"
for page in wsl-gpu-hook wsl-gpu-ctl; do
	gzip -9n <packaging/$page.1 >"$stage/usr/share/man/man1/$page.1.gz"
done
# shellcheck disable=SC2154 # deb= comes from the eval above
sed -e "s|@VERSION@|$deb|" -e "s|@COMMIT@|$commit|" -e "s|@DATE@|$(date -u -R -d "@$SOURCE_DATE_EPOCH")|" \
	packaging/deb/changelog.in | gzip -9n >"$stage/usr/share/doc/wsl-gpu-hook/changelog.gz"

mkdir -p "$out"
for f in "${formats[@]}"; do
	"$tool" pkg -config packaging/nfpm.yaml -format "$f" -arch "$arch" -describe "$describe" -count "$count" \
		-commit "$commit" -stage "$stage" -out "$out"
done
