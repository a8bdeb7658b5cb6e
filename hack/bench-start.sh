#!/bin/sh
# bench-start: what the hook adds to a container start, against plain runc
# and NVIDIA's WSL CDI shape, on the simulated NVIDIA laptop host. Needs
# root, runc, ldconfig and test/e2e's cached Debian image. RUNS (default 21)
# sets the runs per variant; HOOK=path measures a prebuilt hook binary
# instead of one built here the way `make build` builds it; COMPARE=path
# runs a second hook binary (an older build) as another variant. The floors
# true (/bin/true as the hook) and emptygo (an empty static Go hook) show
# what any hook, and any Go hook, costs a start on this machine; the
# hook-alone section also runs floor (hack/benchstart/floorhook), the warm
# start's system calls and round trips with every decision made
# beforehand: what the work costs any Go hook here. HOSTS
# (default plain,latency) picks the simulated hosts, measured one after the
# other: latency serves the lib dir and drivers dir through test/latencyfs
# (FUSE) and delays dxg calls to the host, as WSL's VM boundary does;
# FS_LATENCY and DXG_LATENCY override its per-request delays (defaults and
# their sources in hack/benchstart). Each start's round trips to the host
# (dxg ioctls, file system requests) are counted next to its time. The
# hook process alone is timed too, with its CPU time and page faults;
# `--alone-only` measures only that, `--trace hook --wrap 'strace -f -T -o F'`
# runs one variant under a wrapper (more in hack/benchstart).
set -eu
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
	echo "bench-start: runs containers with runc: run it as root (sudo make bench-start)" >&2
	exit 1
fi
bin=$(mktemp -d /var/tmp/wsl-gpu-bench-bin-XXXXXX)
trap 'rm -rf "$bin"' EXIT
GO=${GO:-go}
hook=${HOOK:-}
if [ -z "$hook" ]; then
	hook=$bin/wsl-gpu-hook
	CGO_ENABLED=0 $GO build -trimpath -ldflags "-s -w -X main.version=${VERSION:-bench}" -o "$hook" ./cmd/wsl-gpu-hook
fi
$GO build -o "$bin/dxgsim" ./test/dxgsim
$GO build -o "$bin/benchstart" ./hack/benchstart
(cd test/latencyfs && $GO build -o "$bin/latencyfs" .)
# The floors: an empty static Go hook, built the way the hook is.
CGO_ENABLED=0 $GO build -trimpath -ldflags "-s -w" -o "$bin/emptyhook" ./hack/benchstart/emptyhook
CGO_ENABLED=0 $GO build -trimpath -ldflags "-s -w" -o "$bin/dxgcall" ./hack/benchstart/dxgcall
# The floor of a warm start: its system calls and round trips, nothing else.
CGO_ENABLED=0 $GO build -trimpath -ldflags "-s -w" -o "$bin/floorhook" ./hack/benchstart/floorhook
"$bin/benchstart" --runs "${RUNS:-21}" --hook "$hook" --compare "${COMPARE:-}" --empty "$bin/emptyhook" --dxgcall "$bin/dxgcall" --floor "$bin/floorhook" --dxgsim "$bin/dxgsim" \
	--latencyfs "$bin/latencyfs" --hosts "${HOSTS:-plain,latency}" ${FS_LATENCY:+--fs-latency "$FS_LATENCY"} ${DXG_LATENCY:+--dxg-latency "$DXG_LATENCY"} "$@"
