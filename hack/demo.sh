#!/usr/bin/env bash
# make demo: a GPU container through runc + wsl-gpu-hook on the simulated WSL
# host (an NVIDIA laptop: Intel iGPU + NVIDIA dGPU). Needs root, runc, gcc,
# busybox-static (make setup installs them). Leaves nothing on the host but
# its work dir, which it removes.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD
work=$(mktemp -d /tmp/wsl-gpu-hook-demo.XXXXXX)
cleanup() {
	runc --root "$work/runc" delete -f demo >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

echo "== simulated WSL host: nvidia-laptop"
bin/wslfixture --profile nvidia-laptop --out "$work/host" --cache /var/cache/wsl-gpu-hook-fixture

echo "== container image: busybox + glibc (a minimal glibc image)"
root=$work/bundle/rootfs
mkdir -p "$root"/{bin,etc,dev,proc,sys,tmp,usr/local/bin,lib64,lib/x86_64-linux-gnu}
cp /bin/busybox "$root/bin/busybox"
for applet in $(/bin/busybox --list); do
	[ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
done
for l in ld-linux-x86-64.so.2 libc.so.6 libdl.so.2 libm.so.6 libpthread.so.0; do
	cp -L "/lib/x86_64-linux-gnu/$l" "$root/lib/x86_64-linux-gnu/$l"
done
ln -s /lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 "$root/lib64/ld-linux-x86-64.so.2"
gcc -O2 -o "$root/usr/local/bin/cudaprobe" hack/cudaprobe.c -ldl
cp bin/wsl-gpu-hook bin/wsl-gpu-ctl "$root/usr/local/bin/"
cat >"$root/demo.sh" <<'IN'
#!/bin/sh
echo "-- inside the container"
ls -l /dev/dxg
echo "-- mounts from the WSL host"
grep /usr/lib/wsl /proc/mounts | cut -d' ' -f2,4
echo "-- wsl-gpu-hook info (in the container, through /dev/dxg)"
wsl-gpu-hook --config /dev/null info
echo "-- the loader finds libcuda.so.1 (no LD_LIBRARY_PATH)"
cudaprobe
echo "-- nvidia-smi"
nvidia-smi
touch /usr/lib/wsl/lib/x 2>/dev/null && echo "lib dir is WRITABLE" || echo "-- /usr/lib/wsl/lib is read-only"
IN
chmod +x "$root/demo.sh"

cat >"$work/config.toml" <<CFG
dxg_device = "$work/dev/dxg"
lib_dir = "$work/host/usr/lib/wsl/lib"
drivers_dir = "$work/host/usr/lib/wsl/drivers"
log_file = "$work/hook.log"
CFG
mkdir -p "$work/dev"

cd "$work/bundle"
runc spec
sed -i \
	-e 's/"terminal": true/"terminal": false/' \
	-e 's#^\t\t\t"sh"#\t\t\t"/demo.sh"#' \
	-e 's#"TERM=xterm"#"TERM=xterm", "NVIDIA_VISIBLE_DEVICES=all"#' \
	-e "s#^\t\"root\": {#\t\"hooks\": {\"prestart\": [{\"path\": \"$top/bin/wsl-gpu-hook\", \"args\": [\"wsl-gpu-hook\", \"--config\", \"$work/config.toml\", \"prestart\"]}]},\n\t\"root\": {#" \
	config.json
cd "$top"

echo "== runc run (under dxgsim, which answers the /dev/dxg ioctls as WSL would)"
bin/dxgsim --profile nvidia-laptop --dev "$work/dev/dxg" -- \
	runc --root "$work/runc" run --bundle "$work/bundle" demo
echo "== hook log"
cat "$work/hook.log"
