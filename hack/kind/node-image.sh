#!/usr/bin/env bash
# Makes kind's node image for Kubernetes v1.37.2 with no registry and no
# download, once per version, and prints the path of its `docker save`
# archive (what `docker load` and `podman load` read):
#
#   hack/kind/node-image.sh          # needs a `docker` on PATH that reaches a daemon
#
# It is kind's own recipe, run offline:
#   1. kind's base image: the Debian 13 root of `hack/engines/root.sh
#      kind-base` (the packages of kind's images/base/Dockerfile), kind's own
#      files from its Go module (images/base/files: entrypoint, systemd
#      units, containerd config), the Dockerfile's steps, and containerd
#      2.4, runc 1.5, crictl and the CNI plugins built from their Go modules
#      (hack/engines, hack/kube); `docker import`ed.
#   2. A Kubernetes release layout (kubernetes/version,
#      kubernetes/server/bin/{kubeadm,kubelet,kubectl,kube-*.tar}) made
#      from hack/kube's binaries, and `kind build node-image --type file`
#      of it on that base image.
#
# kind's builder pulls every image that `kubeadm config images list`, its
# containerd config (pause) and its default CNI and storage manifests name
# and the release's four image archives do not carry; offline that pull
# fails. kind reads the tags an archive carries from its `repositories`
# file when that comes first, so kube-apiserver.tar here carries all of
# them: the control plane (the multicall `kube` under each command's name),
# etcd, pause (Kubernetes' own pause.c), CoreDNS and local-path-provisioner
# built from their modules, local-path-helper (busybox: sh, mkdir, rm), and
# under kindnetd's name an image that only says kindnetd is not built here:
# its module is not served, so the tests run their clusters with
# disableDefaultCNI and never start it.
#
# The archive lives in $CACHE/kind/node-<key>.tar, the key a digest of this
# script and of the bin dirs it was made from (their names carry versions
# and source digests); a temp file renamed into place under a flock.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
CACHE=${E2E_CACHE:-/var/cache/wsl-gpu-hook-e2e}
export PATH=/usr/local/go/bin:$PATH
die() { echo "kind node image: $*" >&2; exit 1; }

KUBE_VERSION=v1.37.2
KIND_VERSION=v0.33.0
NODE_TAG=kindest/node:$KUBE_VERSION-wsl-gpu-hook

dirs=$("$repo/hack/kube/build.sh" kube release cni kind)
read -r -d '' kube release cni kind <<<"$dirs" || true
dirs=$("$repo/hack/engines/build.sh" containerd runc)
read -r -d '' containerd runc <<<"$dirs" || true
[ -n "$kind" ] && [ -n "$runc" ] || die "the build scripts printed no bin dirs"
root=$("$repo/hack/engines/root.sh" kind-base)
key=$( (sha256sum "$0" | cut -c1-64; echo "$kube $release $cni $kind $containerd $runc"; cat "$root/.wsl-gpu-hook-versions") | sha256sum | cut -c1-12)
dest=$CACHE/kind/node-$key.tar

mkdir -p "$CACHE/kind"
exec {lock}>"$CACHE/kind/node.lock"
flock "$lock"
if [ -s "$dest" ]; then
	echo "$dest"
	exit 0
fi
command -v docker >/dev/null || die "no docker on PATH: it builds with kind's builder, which runs docker"
kindsrc=$(cd "$repo/hack/kube" && go mod download -json "sigs.k8s.io/kind@$KIND_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
k8ssrc=$(cd "$repo/hack/kube" && go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
[ -d "$kindsrc/images/base/files" ] || die "kind $KIND_VERSION's module has no images/base/files"
start=$SECONDS
tmp=$(mktemp -d "$CACHE/kind/build.XXXXXX")
trap 'rm -rf --one-file-system "$tmp"' EXIT

# image NAME: the image reference kind's source assigns to the Go constant NAME.
image() {
	sed -n "s/^const $1 = \"\(.*\)\"$/\1/p" "$kindsrc"/pkg/build/nodeimage/const_*.go
}

# --- 1. kind's base image --------------------------------------------------
base=$tmp/base
cp -a "$root" "$base"
rm -f "$base/.wsl-gpu-hook-packages" "$base/.wsl-gpu-hook-versions" "$base/usr/sbin/policy-rc.d"
cp -r "$kindsrc/images/base/files/." "$base/"
chmod -R u+w,go-w "$base/kind" "$base/etc" "$base/usr/local/bin" "$base/LICENSES"
find "$base/kind" "$base/LICENSES" "$base/etc/containerd" "$base/etc/default" "$base/etc/sysctl.d" "$base/etc/systemd/system" "$base/etc/crictl.yaml" -type f -exec chmod 644 {} +
chmod 755 "$base/kind" "$base/kind/bin" "$base"/kind/bin/* "$base"/usr/local/bin/*
# The Dockerfile's RUN steps, in its order.
(
	cd "$base"
	find lib/systemd/system/sysinit.target.wants/ -name systemd-tmpfiles-setup.service -delete
	rm -f lib/systemd/system/multi-user.target.wants/* etc/systemd/system/*.wants/* lib/systemd/system/local-fs.target.wants/* \
		lib/systemd/system/sockets.target.wants/*udev* lib/systemd/system/sockets.target.wants/*initctl* lib/systemd/system/basic.target.wants/*
	echo "ReadKMsg=no" >>etc/systemd/journald.conf
	ln -s /usr/lib/systemd/systemd sbin/init
	rm -rf var/lib/apt/lists/* var/cache/apt/* var/log/* usr/share/doc/* usr/share/man/* usr/share/locale/*
	mkdir -p etc/kubernetes/manifests opt/cni/bin
)
chroot "$base" systemctl enable kubelet.service containerd.service undo-mount-hacks.service >/dev/null 2>&1
chroot "$base" systemctl mask systemd-binfmt.service >/dev/null 2>&1
install -m 755 "$containerd/containerd" "$containerd/ctr" "$containerd/containerd-shim-runc-v2" "$kind/crictl" "$base/usr/local/bin/"
install -m 755 "$runc/runc" "$base/usr/local/sbin/"
for p in host-local loopback ptp portmap; do install -m 755 "$cni/$p" "$base/opt/cni/bin/"; done
chroot "$base" sh -ec "ctr oci spec | jq '.hooks.createContainer[.hooks.createContainer| length] |= . + {\"path\": \"/kind/bin/mount-product-files.sh\"}' | jq 'del(.process.rlimits)' >/etc/containerd/cri-base.json"
base_tag=localhost/kindest-base:wsl-gpu-hook-$key
tar -C "$base" --numeric-owner -cf - . | docker import \
	--change 'ENV container=docker' --change 'STOPSIGNAL SIGRTMIN+3' \
	--change 'ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]' - "$base_tag" >/dev/null
rm -rf --one-file-system "$base"
echo "kind node image: base image $base_tag made in $((SECONDS - start))s" >&2

# --- 2. the images of the release layout ------------------------------------
mapfile -t kubeadm_images < <("$release/kubeadm" config images list --kubernetes-version "$KUBE_VERSION")
want() { printf '%s\n' "${kubeadm_images[@]}" | grep -E "^registry\.k8s\.io/$1:" || die "kubeadm lists no $1 image"; }
pause_tag=$(sed -n 's/^ *sandbox_image = "\(.*\)"$/\1/p' "$kindsrc/images/base/files/etc/containerd/config.toml")
[ -n "$pause_tag" ] || die "kind's containerd config names no sandbox_image"

# tree DIR: an image's root with /tmp, and /etc/passwd for programs that look up root.
tree() { mkdir -p "$1/tmp" "$1/etc" && chmod 1777 "$1/tmp" && echo 'root:x:0:0:root:/root:/bin/sh' >"$1/etc/passwd"; }
# import DIR TAG [--change ...]: DIR as a one-layer image TAG.
import() {
	local dir=$1 tag=$2
	shift 2
	tar -C "$dir" --numeric-owner --owner=0 --group=0 --mtime=@0 --sort=name -cf - . | docker import "$@" - "$tag" >/dev/null
}
path='ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin'

# The control plane and etcd: one layer, the multicall binary under each
# command's name, with iptables (nft) for kube-proxy: one image, five tags.
cp_img=$tmp/kube
tree "$cp_img"
mkdir -p "$cp_img/usr/local/bin" "$cp_img/usr/sbin"
cp "$kube/kube" "$cp_img/usr/local/bin/kube"
for c in kube-apiserver kube-controller-manager kube-scheduler kube-proxy etcd; do ln -s kube "$cp_img/usr/local/bin/$c"; done
cp -a "$root/usr/sbin/xtables-nft-multi" "$cp_img/usr/sbin/"
for c in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
	ln -s xtables-nft-multi "$cp_img/usr/sbin/$c"
	ln -s xtables-nft-multi "$cp_img/usr/sbin/${c/tables/tables-nft}"
done
libs=$(chroot "$root" ldd /usr/sbin/xtables-nft-multi | grep -oE '/[^ ]+')
for lib in $libs; do
	mkdir -p "$cp_img$(dirname "$lib")"
	cp -L "$root$lib" "$cp_img$lib"
done
# The multiarch dir is libc's (x86_64-linux-gnu, aarch64-linux-gnu): the
# extensions iptables loads at run time live under it.
triplet=$(basename "$(dirname "$(printf '%s\n' $libs | grep '/libc\.so')")")
mkdir -p "$cp_img/usr/lib/$triplet"
cp -a "$root/usr/lib/$triplet/xtables" "$cp_img/usr/lib/$triplet/"
cp -a "$root/etc/ethertypes" "$root/etc/protocols" "$cp_img/etc/" 2>/dev/null || true
first=$(want kube-apiserver)
import "$cp_img" "$first" --change "$path"
for c in kube-controller-manager kube-scheduler kube-proxy etcd; do docker tag "$first" "$(want $c)"; done

# pause: Kubernetes' own pause.c, static.
mkdir -p "$tmp/pause"
gcc -Os -static -DVERSION="${pause_tag##*:}" -o "$tmp/pause/pause" "$k8ssrc/build/pause/linux/pause.c"
import "$tmp/pause" "$pause_tag" --change 'ENTRYPOINT ["/pause"]'

coredns_tag=$(want coredns/coredns)
mkdir -p "$tmp/coredns"
tree "$tmp/coredns"
cp "$kind/coredns" "$tmp/coredns/coredns"
import "$tmp/coredns" "$coredns_tag" --change 'ENTRYPOINT ["/coredns"]'

lpp_tag=$(image storageProvisionerImage)
mkdir -p "$tmp/lpp/usr/local/bin"
tree "$tmp/lpp"
cp "$kind/local-path-provisioner" "$tmp/lpp/usr/local/bin/"
import "$tmp/lpp" "$lpp_tag" --change "$path"

busybox=$(command -v busybox) || die "busybox is not installed: apt-get install busybox-static"
helper_tag=$(image storageHelperImage)
mkdir -p "$tmp/helper/bin"
tree "$tmp/helper"
cp "$busybox" "$tmp/helper/bin/busybox"
for c in sh mkdir rm; do ln -s busybox "$tmp/helper/bin/$c"; done
import "$tmp/helper" "$helper_tag" --change 'ENV PATH=/bin'

kindnet_tag=$(image kindnetdImage)
mkdir -p "$tmp/kindnet/bin"
tree "$tmp/kindnet"
cp "$busybox" "$tmp/kindnet/bin/busybox"
ln -s busybox "$tmp/kindnet/bin/sh"
import "$tmp/kindnet" "$kindnet_tag" --change 'ENV PATH=/bin' \
	--change 'ENTRYPOINT ["/bin/sh", "-c", "echo kindnetd: not built here: its Go module is not served, so this cluster needs disableDefaultCNI and a CNI of its own >&2; exit 1"]'
[ -n "$lpp_tag" ] && [ -n "$helper_tag" ] && [ -n "$kindnet_tag" ] || die "kind $KIND_VERSION's sources name no kindnetd or local-path images"

bin=$tmp/release/kubernetes/server/bin
mkdir -p "$bin"
echo "$KUBE_VERSION" >"$tmp/release/kubernetes/version"
for c in kubeadm kubelet kubectl; do cp "$release/$c" "$bin/"; done
for c in kube-controller-manager kube-scheduler kube-proxy; do docker save "$(want $c)" >"$bin/$c.tar"; done
all=("$first" "$(want etcd)" "$pause_tag" "$coredns_tag" "$lpp_tag" "$helper_tag" "$kindnet_tag")
mkdir "$tmp/all"
docker save "${all[@]}" | tar -C "$tmp/all" -xf -
# repositories first, naming every tag (kind reads the first of
# repositories and manifest.json it meets; manifest.json names one image).
{
	printf '{'
	sep=
	for t in "${all[@]}"; do
		printf '%s"%s":{"%s":"%s"}' "$sep" "${t%:*}" "${t##*:}" "$(docker image inspect -f '{{.Id}}' "$t" | sed 's/^sha256://')"
		sep=,
	done
	printf '}\n'
} >"$tmp/all/repositories"
(cd "$tmp/all" && tar --numeric-owner -cf "$bin/kube-apiserver.tar" repositories $(ls -A | grep -vx repositories))
rm -rf --one-file-system "$tmp/all" "$tmp/kube" "$tmp/pause" "$tmp/coredns" "$tmp/lpp" "$tmp/helper" "$tmp/kindnet"
tar -C "$tmp/release" -cf - kubernetes | gzip -1 >"$tmp/kubernetes-server-linux.tar.gz"
rm -rf --one-file-system "$tmp/release"
echo "kind node image: release layout made in $((SECONDS - start))s" >&2

# --- 3. kind's builder ------------------------------------------------------
TMPDIR=$tmp "$kind/kind" build node-image --type file --base-image "$base_tag" --image "$NODE_TAG" "$tmp/kubernetes-server-linux.tar.gz" >"$tmp/build.log" 2>&1 ||
	{ tail -30 "$tmp/build.log" >&2; die "kind build node-image failed (log above)"; }
docker save "$NODE_TAG" >"$dest.tmp"
mv "$dest.tmp" "$dest"
find "$CACHE/kind" -maxdepth 1 -name 'node-*.tar' ! -path "$dest" -delete
echo "kind node image: $NODE_TAG made in $((SECONDS - start))s" >&2
echo "$dest"
