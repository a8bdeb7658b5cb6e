// Package cdispec writes a Container Device Interface spec for the WSL GPU,
// so podman, Docker 25+, containerd 1.7+ and CRI-O can inject it with
// `--device wsl-gpu-hook.dev/gpu=all` and no hook of their own.
//
// The spec has a device "all", one per vendor present ("nvidia", "intel",
// ...) and one per adapter index ("0", "1"): each adds the driver store
// folders it needs; every device shares /dev/dxg, the lib dir, and a
// createContainer hook that registers the libraries with the container's
// loader. Driver store folder names change with every Windows driver update,
// so the spec must be regenerated then (`wsl-gpu-hook cdi generate` at boot,
// see config/systemd); a stale spec fails loudly at container start, because
// its mount source no longer exists.
package cdispec

import (
	"fmt"
	"os"
	"path"
	"sort"
	"strconv"

	cdi "tags.cncf.io/container-device-interface/specs-go"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/mounts"
)

// Kind is the CDI kind of the devices: users write Kind + "=all".
const Kind = "wsl-gpu-hook.dev/gpu"

// mountOptions match what runtimes do for host library folders.
var mountOptions = []string{"ro", "nosuid", "nodev", "rbind", "rprivate"}

// Options is what the spec points at.
type Options struct {
	// Device is the host's /dev/dxg with its numbers.
	Device mounts.HostDevice
	// LibDir and DriversDir are host paths.
	LibDir, DriversDir string
	// HookPath and HookArgs run `wsl-gpu-hook cdi-hook` at createContainer.
	HookPath string
	HookArgs []string
}

// Generate builds the spec for the adapters in inv. Adapters whose driver
// folder is missing are left out (with their devices) rather than producing
// mounts that would fail every container start.
func Generate(inv *driverstore.Inventory, opt Options) (*cdi.Spec, error) {
	perm := os.FileMode(0o666)
	spec := &cdi.Spec{
		Kind: Kind,
		ContainerEdits: cdi.ContainerEdits{
			DeviceNodes: []*cdi.DeviceNode{{
				Path: mounts.ContainerDevice, HostPath: opt.Device.Path, Type: "c",
				Major: int64(opt.Device.Major), Minor: int64(opt.Device.Minor),
				FileMode: &perm, Permissions: "rwm",
			}},
			Mounts: []*cdi.Mount{{HostPath: opt.LibDir, ContainerPath: mounts.ContainerLibDir, Options: mountOptions}},
			Hooks: []*cdi.Hook{{
				HookName: "createContainer", Path: opt.HookPath,
				Args: append(append([]string{}, opt.HookArgs...), "cdi-hook"),
			}},
			// Stop wsl-gpu-hook's own OCI hook (Docker --gpus, hooks.d)
			// from injecting a second time.
			Env: []string{"WSL_GPU_DEVICES=void"},
		},
	}

	byVendor := map[string][]string{}
	var all []string
	for _, a := range inv.Adapters {
		if a.Err != nil || a.Folder == "" {
			continue
		}
		spec.Devices = append(spec.Devices, device(strconv.Itoa(a.Index), []string{a.Folder}, opt))
		v := string(a.Vendor)
		byVendor[v] = appendOnce(byVendor[v], a.Folder)
		all = appendOnce(all, a.Folder)
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("no adapter with a driver store folder: nothing to put in a CDI spec (see wsl-gpu-hook info)")
	}
	vendors := make([]string, 0, len(byVendor))
	for v := range byVendor {
		vendors = append(vendors, v)
	}
	sort.Strings(vendors)
	for _, v := range vendors {
		spec.Devices = append(spec.Devices, device(v, byVendor[v], opt))
	}
	spec.Devices = append(spec.Devices, device("all", all, opt))

	v, err := cdi.MinimumRequiredVersion(spec)
	if err != nil {
		return nil, fmt.Errorf("CDI version: %w", err)
	}
	spec.Version = v
	return spec, nil
}

func device(name string, folders []string, opt Options) cdi.Device {
	d := cdi.Device{Name: name}
	for _, f := range folders {
		d.ContainerEdits.Mounts = append(d.ContainerEdits.Mounts, &cdi.Mount{
			HostPath:      path.Join(opt.DriversDir, f),
			ContainerPath: path.Join(mounts.ContainerDriversDir, f),
			Options:       mountOptions,
		})
	}
	return d
}

func appendOnce(list []string, s string) []string {
	for _, v := range list {
		if v == s {
			return list
		}
	}
	return append(list, s)
}
