#!/usr/bin/env bash
# Makes a Debian root with a suite's container engines, once, and prints its
# path: hack/engines/root.sh trixie|bookworm|kind-base|rancher-alpine
#
# kind-base is Debian 13 with the packages kind's base image installs
# (sigs.k8s.io/kind images/base/Dockerfile), less the storage test tools
# (nfs-common, open-iscsi, e2fsprogs): hack/kind/node-image.sh makes kind's
# base image from it.
#
# rancher-alpine is not Debian: an Alpine-like root as Rancher Desktop's
# WSL distro is (busybox, musl, no glibc), made from Debian's busybox-static
# and musl packages (Alpine's own cannot be downloaded here) with apt-get
# download and dpkg-deb -x, with busybox's applets linked where Alpine has
# them. Rancher Desktop's engines are static and are added by the tests.
#
# The root lives in $CACHE/roots/<name>. It is built in a temp dir and
# renamed into place only when complete, under a flock, so a half-built root
# is never used; its .wsl-gpu-hook-packages stamp lists the suite and
# packages it was made with, and a root whose stamp differs is rebuilt.
# debootstrap --variant=minbase, then apt-get install inside it, each run in
# a private mount namespace so /proc and /dev mounts vanish with it and
# never show on the host; no service is started (policy-rc.d says no).
set -euo pipefail

name=${1:-}
suite=$name
case $name in
# nftables and aardvark-dns: netavark runs nft for a podman network (kind's)
# and starts aardvark-dns for its DNS.
trixie) pkgs="podman crun runc conmon catatonit uidmap docker.io docker-cli containerd mount util-linux nftables aardvark-dns" ;;
bookworm) pkgs="podman crun runc conmon catatonit uidmap docker.io containerd mount util-linux" ;;
kind-base)
	suite=trixie
	pkgs="systemd conntrack iptables nftables iproute2 ethtool util-linux mount kmod libseccomp2 pigz fuse-overlayfs bash ca-certificates curl jq procps"
	;;
rancher-alpine) suite=apt-download pkgs="busybox-static musl" ;;
*) echo "usage: root.sh trixie|bookworm|kind-base|rancher-alpine" >&2; exit 1 ;;
esac

CACHE=${E2E_CACHE:-/var/cache/wsl-gpu-hook-e2e}
dest=$CACHE/roots/$name
stamp="suite=$suite packages=$pkgs"
die() { echo "root: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap)"
[ "$name" = rancher-alpine ] || command -v debootstrap >/dev/null || die "debootstrap is not installed: apt-get install debootstrap"

# alpine_like makes the rancher-alpine root in $1.
alpine_like() {
	local root=$1 debs
	debs=$(mktemp -d)
	# shellcheck disable=SC2086
	# With no package lists (a cleaned image), fetch them once.
	(cd "$debs" && { apt-get download $pkgs || { apt-get update -qq && apt-get download $pkgs; }; }) ||
		{ rm -rf "$debs"; return 1; }
	for deb in "$debs"/*.deb; do dpkg-deb -x "$deb" "$root"; done
	rm -rf "$debs" "$root/usr/share/doc" "$root/usr/share/man"
	local bb=$root/bin/busybox
	[ -x "$bb" ] || bb=$root/usr/bin/busybox
	for d in bin sbin usr/bin usr/sbin usr/local/bin etc root proc sys dev tmp run var/lib etc/rancher mnt; do
		mkdir -p "$root/$d"
	done
	[ -x "$root/bin/busybox" ] || ln -s ../usr/bin/busybox "$root/bin/busybox"
	local applet
	for applet in $("$bb" --list-full); do
		[ -e "$root/$applet" ] || [ -L "$root/$applet" ] || ln -s /bin/busybox "$root/$applet"
	done
	ln -s /run "$root/var/run"
	chmod 1777 "$root/tmp"
	printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/sbin/nologin\n' >"$root/etc/passwd"
	printf 'root:x:0:\nnobody:x:65534:\n' >"$root/etc/group"
	printf 'NAME="Alpine Linux"\nID=alpine\nPRETTY_NAME="Rancher Desktop WSL Distribution (simulated: Debian busybox-static and musl)"\n' >"$root/etc/os-release"
	# Alpine's loader; no glibc may be in this root.
	[ -e "$root/lib/ld-musl-x86_64.so.1" ] || [ -e "$root/lib/ld-musl-aarch64.so.1" ] || { echo "no musl loader in $root/lib" >&2; return 1; }
	if find "$root" -name 'libc.so.6' | grep -q .; then
		echo "glibc in the rancher-alpine root" >&2
		return 1
	fi
}

# Debian's mirror is reachable only through apt's configured source.
mirror=$(grep -rhoE '^(deb|URIs:) +https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null |
	grep -oE 'https?://[^ ]+' | head -1 || true)
mirror=${mirror:-http://deb.debian.org/debian}

mkdir -p "$CACHE/roots"
exec {lock}>"$dest.lock"
flock "$lock"
if [ -d "$dest" ] && [ "$(cat "$dest/.wsl-gpu-hook-packages" 2>/dev/null)" = "$stamp" ]; then
	echo "$dest"
	exit 0
fi
tmp=$(mktemp -d "$dest.tmp.XXXXXX")
chmod 755 "$tmp" # a root file system's / is readable by all (mktemp makes 0700)
trap 'rm -rf --one-file-system "$tmp"' EXIT
start=$SECONDS
log=$tmp.log
if [ "$name" = rancher-alpine ]; then
	if ! alpine_like "$tmp" >"$log" 2>&1; then
		tail -20 "$log" >&2
		die "making the rancher-alpine root failed"
	fi
	echo "$stamp" >"$tmp/.wsl-gpu-hook-packages"
	rm -f "$log"
	rm -rf --one-file-system "$dest"
	mv "$tmp" "$dest"
	trap - EXIT
	echo "root: made $name in $((SECONDS - start))s" >&2
	echo "$dest"
	exit 0
fi
# In a private mount namespace: debootstrap mounts /proc and more in the
# target while it runs, which other tests' checks of the host's mount table
# would see.
if ! unshare --mount --propagation private debootstrap --variant=minbase "$suite" "$tmp" "$mirror" >"$log" 2>&1; then
	tail -20 "$log" >&2
	die "debootstrap $suite from $mirror failed"
fi
printf '#!/bin/sh\nexit 101\n' >"$tmp/usr/sbin/policy-rc.d"
chmod 755 "$tmp/usr/sbin/policy-rc.d"
# shellcheck disable=SC2016
if ! unshare --mount --propagation private sh -ec '
	mount -t proc proc "$1/proc"
	mount --rbind /dev "$1/dev"
	root=$1; shift
	chroot "$root" apt-get update -qq
	DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get install -y -qq --no-install-recommends "$@"
	chroot "$root" apt-get clean
' sh "$tmp" $pkgs >>"$log" 2>&1; then
	tail -30 "$log" >&2
	die "apt-get install in the $suite root failed"
fi
chroot "$tmp" dpkg-query -W -f='${Package} ${Version}\n' >"$tmp/.wsl-gpu-hook-versions"
echo "$stamp" >"$tmp/.wsl-gpu-hook-packages"
rm -f "$log"
if [ -d "$dest" ]; then
	mv "$dest" "$dest.old.$$"
	rm -rf --one-file-system "$dest.old.$$"
fi
mv "$tmp" "$dest"
trap - EXIT
echo "root: made $name in $((SECONDS - start))s" >&2
echo "$dest"
