#!/usr/bin/env bash
# Builds the amd64 .deb with dpkg-deb alone (no debhelper):
#   hack/deb.sh [OUTDIR]      (default bin/), prints the package's path
# VERSION overrides the package version (default 0.1.0~git<date>.<commit>).
# What goes where, and why, is in packaging/deb/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH

out=${1:-bin}
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
when=$(git log -1 --format=%ct 2>/dev/null || date +%s)
VERSION=${VERSION:-0.1.0~git$(date -u -d "@$when" +%Y%m%d).$commit}
for tool in dpkg-deb gzip go; do
	command -v "$tool" >/dev/null || { echo "deb: $tool is not installed" >&2; exit 1; }
done

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
chmod 0755 "$stage"
d=packaging/deb
doc=$stage/usr/share/doc/wsl-gpu-hook
install -d -m 0755 "$stage/DEBIAN" "$stage/usr/bin" "$stage/usr/libexec/wsl-gpu-hook" \
	"$stage/etc/wsl-gpu-hook" "$stage/var/cache/wsl-gpu-hook" "$stage/usr/lib/systemd/system" "$stage/usr/share/man/man1" "$doc/examples"

# The binaries, static (no cgo) as everywhere else: the hook engines run on
# every container start, wsl-gpu-ctl for the commands people run, and the
# hook's other names.
for cmd in wsl-gpu-hook wsl-gpu-ctl; do
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -buildvcs=false \
		-ldflags "-s -w -X main.version=$VERSION" -o "$stage/usr/bin/$cmd" ./cmd/$cmd
done
ln -s wsl-gpu-hook "$stage/usr/bin/wsl-gpu-runtime"
# Off every PATH: /usr/bin/nvidia-container-runtime-hook is NVIDIA's toolkit's.
ln -s ../../bin/wsl-gpu-hook "$stage/usr/libexec/wsl-gpu-hook/nvidia-container-runtime-hook"

install -m 0644 config/config.toml "$stage/etc/wsl-gpu-hook/config.toml"
# The hooks.d file exactly as `wsl-gpu-hook install podman` writes it.
"$stage/usr/bin/wsl-gpu-hook" install --prefix "$stage" --hook /usr/bin/wsl-gpu-hook podman >/dev/null
sed -e 's|/usr/local/bin/wsl-gpu-hook|/usr/bin/wsl-gpu-hook|g' -e 's|^\[Unit\]$|[Unit]\nDocumentation=man:wsl-gpu-hook(1)|' \
	config/systemd/wsl-gpu-hook-cdi.service \
	>"$stage/usr/lib/systemd/system/wsl-gpu-hook-cdi.service"

gzip -9n <"$d/wsl-gpu-hook.1" >"$stage/usr/share/man/man1/wsl-gpu-hook.1.gz"
ln -s wsl-gpu-hook.1.gz "$stage/usr/share/man/man1/wsl-gpu-runtime.1.gz"
ln -s wsl-gpu-hook.1.gz "$stage/usr/share/man/man1/wsl-gpu-ctl.1.gz"
install -m 0644 README.md "$doc/README.md"
install -m 0644 "$d/copyright" "$doc/copyright"
install -m 0644 "$d/docker-gpus-path.conf" "$doc/examples/docker-gpus-path.conf"
install -D -m 0644 "$d/lintian-overrides" "$stage/usr/share/lintian/overrides/wsl-gpu-hook"
sed -e "s|@VERSION@|$VERSION|" -e "s|@COMMIT@|$commit|" -e "s|@DATE@|$(date -u -R -d "@$when")|" \
	"$d/changelog.in" | gzip -9n >"$doc/changelog.gz"

# Control files: sizes and checksums of what is staged.
size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
sed -e "s|@VERSION@|$VERSION|" -e "s|@SIZE@|$size|" "$d/control.in" >"$stage/DEBIAN/control"
echo /etc/wsl-gpu-hook/config.toml >"$stage/DEBIAN/conffiles"
for s in postinst prerm postrm; do
	install -m 0755 "$d/$s" "$stage/DEBIAN/$s"
done
(cd "$stage" && find . -path ./DEBIAN -prune -o -path ./etc -prune -o -type f -printf '%P\0' |
	LC_ALL=C sort -z | xargs -0 md5sum) >"$stage/DEBIAN/md5sums"
chmod 0644 "$stage/DEBIAN/control" "$stage/DEBIAN/conffiles" "$stage/DEBIAN/md5sums"
find "$stage" -exec touch -h -d "@$when" {} +

mkdir -p "$out"
deb=$out/wsl-gpu-hook_${VERSION}_amd64.deb
SOURCE_DATE_EPOCH=$when dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >/dev/null
echo "$deb"
