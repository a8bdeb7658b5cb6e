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
		"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/doctor":       "cmd/wsl-gpu-ctl",
		"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/install":      "cmd/wsl-gpu-ctl",
		"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/cdiinstall":   "cmd/wsl-gpu-ctl",
		"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/cdispec":      "cmd/wsl-gpu-ctl",
		"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/deviceplugin": "cmd/wsl-gpu-ctl",
		// GPU statistics (issue #24) never run on a container start.
		"github.com/prometheus/":                              "cmd/wsl-gpu-ctl",
		"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/gpustats":   "cmd/wsl-gpu-ctl",
		"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/gpumetrics": "cmd/wsl-gpu-ctl",
	}
	for _, pkg := range strings.Fields(string(out)) {
		for prefix, home := range banned {
			if strings.HasPrefix(pkg, prefix) {
				t.Errorf("wsl-gpu-hook links %s: keep it in %s", pkg, home)
			}
		}
	}
}

// The hook logs through pkg/hooklog: logrus's logger and formatter cost
// every start about half a millisecond. Only main names logrus, to silence
// the standard logger opencontainers/cgroups writes to; once nothing on the
// hook's path imports logrus, ban it in TestHookLinksOnlyTheStart.
func TestHookLogsThroughHooklog(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}} {{join .Imports " "}}`, ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	const module, main = "github.com/wsl-gpu-hook/wsl-gpu-hook/", "github.com/wsl-gpu-hook/wsl-gpu-hook/cmd/wsl-gpu-hook"
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, " ")
		if !strings.HasPrefix(pkg, module) || pkg == main {
			continue
		}
		for _, imp := range strings.Fields(imports) {
			if imp == "github.com/sirupsen/logrus" {
				t.Errorf("%s imports logrus: the hook logs through pkg/hooklog", pkg)
			}
		}
	}
}
