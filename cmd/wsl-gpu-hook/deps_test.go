package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The hook runs on every container start, and every package it links costs
// that start its initialisation and its share of a bigger binary (page
// faults, on WSL's VM as anywhere). What people run by hand lives in
// wsl-gpu-ctl, the device plugin's gRPC and kubelet API in their own binary.
func TestHookLinksOnlyTheStart(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	banned := map[string]string{
		"google.golang.org/grpc":     "cmd/wsl-gpu-device-plugin",
		"google.golang.org/protobuf": "cmd/wsl-gpu-device-plugin",
		"k8s.io/":                    "cmd/wsl-gpu-device-plugin",
		// The CDI module's spec cache and its YAML parser: spec writing
		// and conflict checks are wsl-gpu-ctl's.
		"tags.cncf.io/container-device-interface/pkg/": "cmd/wsl-gpu-ctl",
		"go.yaml.in/":          "cmd/wsl-gpu-ctl",
		"gopkg.in/yaml":        "cmd/wsl-gpu-ctl",
		"github.com/fsnotify/": "cmd/wsl-gpu-ctl",
		"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/setup/doctor":      "cmd/wsl-gpu-ctl",
		"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/setup/install":     "cmd/wsl-gpu-ctl",
		"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/setup/cdiinstall":  "cmd/wsl-gpu-ctl",
		"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/setup/cdispec":     "cmd/wsl-gpu-ctl",
		"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/kube/deviceplugin": "cmd/wsl-gpu-ctl",
		// GPU statistics (issue #24) never run on a container start.
		"github.com/prometheus/":                                    "cmd/wsl-gpu-ctl",
		"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/usage/gpustats":   "cmd/wsl-gpu-ctl",
		"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/usage/gpumetrics": "cmd/wsl-gpu-ctl",
		// Package initialisation and binary size: an empty Go binary that
		// only blank-imports github.com/opencontainers/cgroups/devices
		// starts 1.5 ms slower than an empty one (9.15 against 7.64 ms, 300
		// alternating runs), as it drags godbus/dbus, net, os/user, crypto,
		// math/big, go/parser and go/format (cilium/ebpf/internal) and
		// compress into every start. devcgroup generates the device
		// program itself; the library stays its tests' oracle. debug/elf
		// brings compress/flate, zlib, zstd, debug/dwarf and hash/crc32
		// for what only a cold report reads: pkg/host/elfinfo reads ELF headers.
		"net": "cmd/wsl-gpu-ctl or tests (no start needs the network)",
		// cli.Parse reads --config itself: a FlagSet and flag's package
		// initialisation were ~0.1 ms of every start. cli.ParseFlags, the
		// other binaries' --help and usage errors, takes their FlagSet as
		// an interface so that pkg/shared/cli stays without flag.
		"flag":                              "pkg/shared/cli's tests (the oracle) and the other binaries",
		"crypto/":                           "cmd/wsl-gpu-ctl or tests (no start hashes or signs)",
		"go/":                               "tests (cilium/ebpf's internals bring it)",
		"debug/":                            "tests (pkg/host/elfinfo reads the ELF headers the hook needs)",
		"compress/":                         "cmd/wsl-gpu-ctl or tests",
		"github.com/opencontainers/cgroups": "pkg/start/devcgroup's tests (the oracle)",
		"github.com/cilium/":                "pkg/start/devcgroup's tests (the oracle)",
		"github.com/godbus/":                "pkg/start/devcgroup's tests (the oracle)",
		"github.com/coreos/":                "pkg/start/devcgroup's tests (the oracle)",
		// The hook logs through pkg/start/hooklog: logrus's logger and text
		// formatter cost every start about half a millisecond.
		"github.com/sirupsen/logrus": "pkg/start/hooklog's tests (the oracle)",
	}
	for _, pkg := range strings.Fields(string(out)) {
		for prefix, home := range banned {
			// "net" bans net and net/..., not netip's neighbours by name.
			if strings.HasPrefix(pkg, prefix) && (prefix != "net" || pkg == "net" || strings.HasPrefix(pkg, "net/")) {
				t.Errorf("wsl-gpu-hook links %s: keep it in %s", pkg, home)
			}
		}
	}
}
