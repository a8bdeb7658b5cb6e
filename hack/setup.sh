#!/usr/bin/env bash
# Installs what building and testing wsl-gpu-hook needs on Debian/Ubuntu.
# Idempotent: packages already present are not touched.
set -euo pipefail

pkgs=(gcc libc6-dev make runc busybox-static debootstrap util-linux iproute2 docker.io podman containerd)
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
command -v go >/dev/null || { echo "setup: Go is not on PATH (install Go 1.26+)" >&2; exit 1; }
