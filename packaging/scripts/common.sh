# shellcheck shell=sh
# What every format's maintainer scripts share: hack/release inlines this
# file where a script sources it, so each script in a package stands alone
# (a postrm runs when the package's files are gone). The entry scripts in
# deb/, rpm/ and apk/ only turn their format's arguments into one of the
# steps below. What the steps do, and why, is in packaging/README.md.
#
# The package edits no other package's configuration (Debian policy 10.7.4,
# and the same for rpm and apk): it only tells the administrator the
# commands that do, which keep a backup of every file they change and are
# undone by `wsl-gpu-hook uninstall`.

# Held to pkg/setup/cdiinstall (System().ReadDirs, SpecNames, UnitName) and to
# pkg/setup/install's backup suffix by test/packages's TestPrermKnowsOurSpecs.
cdi_dirs="/etc/cdi /var/run/cdi"
cdi_specs="wsl-gpu-hook.dev-gpu.json nvidia.com-gpu_wsl-gpu-hook.json amd.com-gpu_wsl-gpu-hook.json wsl-gpu-hook.json"
unit=wsl-gpu-hook-cdi.service
hook=/usr/bin/wsl-gpu-hook
bak=.wsl-gpu-hook.bak
# DPKG_ROOT is the root dpkg works on (dpkg --root), "" for this system;
# rpm and apk run their scripts chrooted into theirs. dpkg does too, but
# with --force-script-chrootless (mmdebstrap) the scripts run on the build
# host: nothing of the build host is then run or changed (refresh_specs
# runs nothing, in_root keeps every path inside the root).
root=${DPKG_ROOT:-}

# in_root PATH: the path on this system of PATH in the root the scripts
# work on. Without DPKG_ROOT it is PATH. With it, a link of the target
# root on the way (Debian's /var/run -> /run, any absolute link) would
# lead out of the root into the build host's files: each link but the last
# component is resolved inside the root, as a chroot would. The last
# component is left as it is (the scripts test and remove links). A link
# loop gives a path that does not exist.
in_root() {
	if [ -z "$root" ]; then
		printf '%s\n' "$1"
		return 0
	fi
	_done='' _rest=${1%/*} _n=0
	_rest=${_rest#/}
	while [ -n "$_rest" ]; do
		_c=${_rest%%/*}
		case $_rest in
		*/*) _rest=${_rest#*/} ;;
		*) _rest='' ;;
		esac
		case $_c in
		'' | .) continue ;;
		..)
			_done=${_done%/*}
			continue
			;;
		esac
		if [ -L "$root$_done/$_c" ]; then
			_n=$((_n + 1))
			if [ "$_n" -gt 40 ]; then
				_done=/.wsl-gpu-hook-link-loop _rest=''
				break
			fi
			_t=$(readlink "$root$_done/$_c")
			case $_t in
			/*) _done='' ;;
			esac
			_rest=${_t#/}${_rest:+/$_rest}
		else
			_done=$_done/$_c
		fi
	done
	printf '%s\n' "$root$_done/${1##*/}"
}

# print_commands: after a first install, the commands that wire the hook
# into each engine.
print_commands() {
	cat <<'MSG'
wsl-gpu-hook is installed. It changes no engine configuration by itself;
wire it into the engines you use:
  Docker:      sudo wsl-gpu-hook install docker && sudo systemctl restart docker
  podman:      ready: podman run --annotation wsl-gpu-hook/devices=all ...
  CDI:         sudo wsl-gpu-hook install cdi
               (writes the CDI spec and a unit that refreshes it at every boot)
  containerd:  sudo wsl-gpu-hook install containerd && sudo systemctl restart containerd
Then check everything with: wsl-gpu-hook doctor
MSG
}

# refresh_specs: on upgrade, the CDI specs `wsl-gpu-hook install cdi` wrote
# are written again by the new version, so what a container gets does not
# wait for the next boot. Those specs are the package's own tools' files,
# not another package's configuration: the unit install wrote in /etc names
# the command and its options, and is what regenerates them at boot. The
# command rewrites only files whose content changes. It is run only when
# it runs this package's binary: a unit an administrator changed, or one a
# wsl-gpu-hook installed elsewhere wrote, is started by systemd, not by a
# package upgrade. Specs of rootless users (systemd --user units) are
# theirs to refresh. A failure is reported and does not fail the upgrade:
# the unit still runs at boot. Into another root (DPKG_ROOT) nothing runs:
# the command would run on the build host, against its /dev/dxg and its
# spec dirs; the unit does it at the root's first boot.
refresh_specs() {
	u=$(in_root "/etc/systemd/system/$unit")
	[ -f "$u" ] || return 0
	if [ -n "$root" ]; then
		echo "wsl-gpu-hook: installed into $root: its CDI specs are regenerated at its first boot ($unit)"
		return 0
	fi
	cmd=$(sed -n 's/^ExecStart=//p' "$u" | tail -n 1)
	case $cmd in
	"$hook "*[\\\"\'%\$\;*?[]*)
		# Quoted, specifier or glob characters: systemd's rules, not sh's.
		echo "wsl-gpu-hook: refresh the CDI specs with: sudo systemctl start wsl-gpu-hook-cdi" ;;
	"$hook "*)
		if [ ! -e /dev/dxg ]; then
			echo "wsl-gpu-hook: no /dev/dxg: the CDI specs are regenerated at the next boot"
		elif $cmd >/dev/null; then
			echo "wsl-gpu-hook: regenerated the CDI specs ($cmd)"
		else
			echo "wsl-gpu-hook: regenerating the CDI specs failed; run: sudo systemctl start wsl-gpu-hook-cdi" >&2
		fi ;;
	*)
		echo "wsl-gpu-hook: /etc/systemd/system/$unit runs another command than $hook: refresh the CDI specs with: sudo systemctl start wsl-gpu-hook-cdi" ;;
	esac
}

# remove_ours: at removal (not upgrade), what `wsl-gpu-hook install cdi`
# made for this package's binary goes with it, since it would name a
# deleted file: the CDI refresh unit is stopped and disabled (and its file
# in /etc, which install wrote, removed), and our CDI specs are removed,
# with the backups install kept of them. Only ours: a spec is ours when its
# name is one the project writes and its hooks run this package's binary;
# NVIDIA's and every other producer's specs stay, and so do the specs and
# the unit of a wsl-gpu-hook installed elsewhere (/usr/local/bin), which
# still work. Rootless users' specs and units (`install --user cdi`) are in
# their homes, which packages leave alone. Engine configuration is the
# administrator's: it only says which file still names the runtime
# (`wsl-gpu-hook uninstall ENGINE` edits it).
remove_ours() {
	for f in /etc/docker/daemon.json /etc/containerd/config.toml; do
		if grep -qs wsl-gpu-runtime "$(in_root "$f")"; then
			echo "wsl-gpu-hook: $f still names wsl-gpu-runtime: run 'wsl-gpu-hook uninstall docker containerd' before removing the package, or containers using that runtime fail to start" >&2
		fi
	done

	# The unit is ours unless `install cdi` wrote one in /etc (which wins
	# over the shipped one) that runs another wsl-gpu-hook.
	sys=$(in_root /etc/systemd/system/.)
	if [ ! -e "$sys/$unit" ] || grep -qs "^ExecStart=$hook " "$sys/$unit"; then
		stop_unit # each format's entry script defines it
		# What `systemctl disable` does for the unit's WantedBy= (and an
		# administrator's add-wants), by hand: systemctl may be missing
		# (no systemd in the root) and refuses to act on another root.
		for l in "$sys"/*.wants/"$unit" "$sys"/*.requires/"$unit"; do
			l=$(in_root "/etc/systemd/system/${l#"$sys/"}")
			if [ -L "$l" ]; then
				rm -f "$l"
			fi
		done
		rm -f "$sys/$unit" "$sys/$unit$bak"
	fi

	for d in $cdi_dirs; do
		dir=$(in_root "$d/.")
		for n in $cdi_specs; do
			for f in "$dir/$n" "$dir/$n$bak"; do
				if [ -f "$f" ] && grep -qs "\"$hook\"" "$f"; then
					rm -f "$f"
				fi
			done
		done
		# Another producer's spec `install --nvidia-kind=ours cdi` moved
		# aside is theirs: it stays, and the administrator hears where.
		for f in "$dir"/*"$bak"; do
			n=${f##*/}
			case " $cdi_specs " in
			*" ${n%"$bak"} "*) continue ;;
			esac
			if [ -f "$f" ]; then
				echo "wsl-gpu-hook: $d/$n is another producer's CDI spec that 'wsl-gpu-hook install cdi' moved aside: move it back to $d/${n%"$bak"} if you want it" >&2
			fi
		done
	done
}

# reload_systemd tells a running systemd the unit files changed.
reload_systemd() {
	if [ -z "$root" ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
		systemctl daemon-reload >/dev/null 2>&1 || true
	fi
}

# unlink_hook: the nvidia-container-runtime-hook link `wsl-gpu-hook install
# docker` made dangles once the package is gone and would make dockerd's
# --gpus fail: it goes, but only while it still points at our binary
# (NVIDIA's own hook is never touched).
unlink_hook() {
	for l in /usr/bin/nvidia-container-runtime-hook /usr/local/bin/nvidia-container-runtime-hook; do
		l=$(in_root "$l")
		if [ -L "$l" ] && [ "$(readlink "$l")" = "$hook" ]; then
			rm -f "$l"
		fi
	done
}

# purge_state: the hook's log and the SONAMEs it keeps across boots.
purge_state() {
	log=$(in_root /var/log/.)
	rm -f "$log/wsl-gpu-hook.log" "$log"/wsl-gpu-hook.log.*
	rm -rf "$(in_root /var/cache/wsl-gpu-hook)"
}
