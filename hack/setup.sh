#!/usr/bin/env bash
# Installs what building and testing wsl-gpu-hook needs on Debian/Ubuntu.
# Idempotent: packages already present are not touched.
set -euo pipefail

pkgs=(gcc libc6-dev make runc crun libseccomp-dev busybox-static debootstrap util-linux iproute2 iptables docker.io podman containerd uidmap lintian rpm rpmlint qemu-user-static tmux)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "setup: missing packages ${missing[*]}: run as root (sudo make ...)" >&2
		exit 1
	fi
	echo "setup: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# Rootless podman's tests run as this user, which needs subordinate ids
# (useradd gives them on Debian; an older useradd may not).
rootless=wsl-gpu-rootless
if [ "$(id -u)" -eq 0 ]; then
	id -u "$rootless" >/dev/null 2>&1 || useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$rootless"
	grep -q "^$rootless:" /etc/subuid 2>/dev/null || usermod --add-subuids 1065536-1131071 "$rootless"
	grep -q "^$rootless:" /etc/subgid 2>/dev/null || usermod --add-subgids 1065536-1131071 "$rootless"
fi
command -v go >/dev/null || { echo "setup: Go is not on PATH (install Go 1.26+)" >&2; exit 1; }
