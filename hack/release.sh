#!/usr/bin/env bash
# make release: everything a release ships, offline and reproducibly:
#   hack/release.sh OUTDIR
# For each architecture in ARCHES (default amd64 arm64):
#   wsl-gpu-hook_<version>_linux_<arch>.tar.gz   the four static binaries, the config,
#                                                the CDI unit, the man page, the docs,
#                                                Rancher Desktop's provisioning script
#   the deb, rpm and apk (hack/packages.sh, from packaging/nfpm.yaml)
# and once:
#   wsl-gpu-hook-image_<version>.tar             `make image`, tagged localhost/wsl-gpu-hook:<version>
#   wsl-gpu-hook-<chart version>.tgz             the Helm chart, its appVersion that tag, so
#                                                `helm install` pulls the image without --set
#   <artifact>.cdx.json                          a CycloneDX SBOM of each artifact
#   CHANGELOG.md                                 the commits since the last tag
#   SHA256SUMS                                   of every file above
# <version> is `git describe --tags --always --dirty`, stamped into every
# binary; each package format gets its mapping of it (hack/release/version).
# Every time in every artifact is the commit's (SOURCE_DATE_EPOCH), every
# owner root, builds -trimpath with an empty build id: the same commit gives
# the same bytes (test/packages' TestReleaseReproducible builds it twice). A
# tree with uncommitted changes is refused (ALLOW_DIRTY=1 builds it anyway,
# versioned -dirty). Nothing is fetched: the Go modules come from the module
# cache that the builds filled.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH

out=${1:?usage: hack/release.sh OUTDIR}
arches=${ARCHES:-amd64 arm64}
describe=${VERSION:-$(git describe --tags --always --dirty)}
case $describe in
*-dirty)
	if [ -z "${ALLOW_DIRTY:-}" ]; then
		echo "release: the tree has uncommitted changes ($describe): commit them (a release is built from a commit), or set ALLOW_DIRTY=1" >&2
		exit 1
	fi ;;
esac
count=$(git rev-list --count HEAD)
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}
export VERSION=$describe
mkdir -p "$out"
out=$(cd "$out" && pwd)
if [ -n "$(ls -A "$out")" ]; then
	echo "release: $out is not empty: give an empty or new directory" >&2
	exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export RELEASE_TOOL=$work/release
go build -C hack/release -o "$RELEASE_TOOL" .
go build -C hack/release -o "$work/cyclonedx-gomod" github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod
eval "$("$RELEASE_TOOL" version -describe "$describe" -count "$count")" # deb= rpm= apk= semver=

# binsbom ARCH BINARY: the binary's SBOM (the modules it was linked from,
# read from it; their licenses from the module cache), offline: GOPROXY=off,
# and GOSUMDB=off as the cached modules were checked against go.sum when the
# build fetched them. GOARCH names the binary's arch in the package URLs
# (cyclonedx-gomod takes it from the environment, not the binary).
binsbom() {
	GOARCH=$1 GOPROXY=off GOSUMDB=off "$work/cyclonedx-gomod" bin -json -licenses -noserial -notimestamp \
		-version "$describe" -output "$2.cdx.json" "$2" 2>>"$work/sbom.log" ||
		{ cat "$work/sbom.log" >&2; exit 1; }
}
# sbom ARTIFACT PURL BINARY...: the artifact's SBOM, from its binaries'.
sbom() {
	local artifact=$1 purl=$2
	shift 2
	"$RELEASE_TOOL" sbom -artifact "$artifact" -version "$describe" -purl "$purl" -out "$artifact.cdx.json" \
		"${@/%/.cdx.json}"
}

flags=(-trimpath -buildvcs=false -ldflags "-s -w -buildid= -X main.version=$describe")
for arch in $arches; do
	bin=$work/$arch
	for cmd in wsl-gpu-hook wsl-gpu-ctl wsl-gpu-device-plugin wsl-gpu-dra-driver; do
		CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build "${flags[@]}" -o "$bin/$cmd" ./cmd/$cmd
		binsbom "$arch" "$bin/$cmd"
	done

	name=wsl-gpu-hook_${describe}_linux_$arch
	# The README links the docs pages and the code map: they travel with it
	# (the tool sorts what it writes, so the glob's order does not matter).
	docs=(ARCHITECTURE.md=ARCHITECTURE.md)
	for page in docs/*.md; do
		docs+=("$page=$page")
	done
	"$RELEASE_TOOL" tar -out "$out/$name.tar.gz" -prefix "$name/" \
		"$bin/wsl-gpu-hook=bin/wsl-gpu-hook:755" "$bin/wsl-gpu-ctl=bin/wsl-gpu-ctl:755" \
		"$bin/wsl-gpu-device-plugin=bin/wsl-gpu-device-plugin:755" "$bin/wsl-gpu-dra-driver=bin/wsl-gpu-dra-driver:755" \
		config/config.toml=config/config.toml config/systemd/wsl-gpu-hook-cdi.service=config/systemd/wsl-gpu-hook-cdi.service \
		packaging/wsl-gpu-hook.1=man/wsl-gpu-hook.1 packaging/wsl-gpu-ctl.1=man/wsl-gpu-ctl.1 \
		packaging/completions/wsl-gpu-ctl.bash=completions/wsl-gpu-ctl.bash packaging/completions/_wsl-gpu-ctl=completions/_wsl-gpu-ctl \
		packaging/rancher-desktop/wsl-gpu-hook.start=rancher-desktop/wsl-gpu-hook.start:755 \
		README.md=README.md "${docs[@]}" LICENSE=LICENSE
	sbom "$out/$name.tar.gz" "pkg:generic/wsl-gpu-hook@$describe?arch=$arch" \
		"$bin/wsl-gpu-hook" "$bin/wsl-gpu-ctl" "$bin/wsl-gpu-device-plugin" "$bin/wsl-gpu-dra-driver"

	case $arch in
	amd64) march=x86_64 ;;
	arm64) march=aarch64 ;;
	esac
	# shellcheck disable=SC2154 # deb= rpm= apk= come from the eval above
	while read -r p; do
		case $p in
		*.deb) purl="pkg:deb/wsl-gpu-hook@$deb?arch=$arch" ;;
		*.rpm) purl="pkg:rpm/wsl-gpu-hook@$rpm?arch=$march" ;;
		*.apk) purl="pkg:apk/wsl-gpu-hook@$apk?arch=$march" ;;
		esac
		sbom "$p" "$purl" "$bin/wsl-gpu-hook" "$bin/wsl-gpu-ctl"
	done < <(BINDIR=$bin ./hack/packages.sh "$out" "$arch")
done

# The image. `make image` builds this machine's architecture today; it is
# given ARCHES so that, once it writes an OCI index of them, the archive is
# that index, as it is (the SBOM below then wants each arch's binaries).
image=$out/wsl-gpu-hook-image_$describe.tar
make -s image BIN="$work/image" VERSION="$describe" IMAGE="localhost/wsl-gpu-hook:$describe" ARCHES="$arches" >/dev/null
cp "$work/image/wsl-gpu-hook-image.tar" "$image"
for cmd in wsl-gpu-hook wsl-gpu-ctl wsl-gpu-device-plugin wsl-gpu-dra-driver; do
	binsbom "$(go env GOARCH)" "$work/image/$cmd"
done
sbom "$image" "pkg:oci/wsl-gpu-hook?repository_url=localhost/wsl-gpu-hook&tag=$describe" \
	"$work/image/wsl-gpu-hook" "$work/image/wsl-gpu-ctl" "$work/image/wsl-gpu-device-plugin" "$work/image/wsl-gpu-dra-driver"

# shellcheck disable=SC2154 # semver= comes from the eval above
"$RELEASE_TOOL" chart -src deploy/helm/wsl-gpu-hook -version "$semver" -app-version "$describe" \
	-out "$out/wsl-gpu-hook-$semver.tgz"

# The changelog section: the commits since the last tag (all of them
# before the first).
since=$(git describe --tags --abbrev=0 2>/dev/null || true)
{
	echo "## wsl-gpu-hook $describe ($(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%d))"
	echo
	if [ -n "$since" ]; then
		echo "Changes since $since:"
	else
		echo "Changes since the first commit:"
	fi
	echo
	git log --no-merges --format='- %s (%h)' ${since:+"$since..HEAD"}
} >"$out/CHANGELOG.md"

(cd "$out" && find . -maxdepth 1 -type f ! -name SHA256SUMS -printf '%P\n' | LC_ALL=C sort | xargs sha256sum >SHA256SUMS)
echo "$out"
