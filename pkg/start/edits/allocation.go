package edits

import "strings"

// KubeletDevice is v1beta1's DeviceSpec without its types: a node the
// kubelet's runtime makes, with its device-cgroup permissions.
type KubeletDevice struct{ HostPath, ContainerPath, Permissions string }

// KubeletMount is v1beta1's Mount without its types: always read-only.
type KubeletMount struct{ HostPath, ContainerPath string }

// Allocation is v1beta1's ContainerAllocateResponse without its types and
// without its CDI devices, which the device plugin names itself.
type Allocation struct {
	Devices []KubeletDevice
	Mounts  []KubeletMount
	Env     map[string]string
}

// Allocation is e as a device plugin's answer: nodes, read-only mounts
// and variables. The answer cannot carry files, loader-cache entries,
// links or aliases, nor run a hook: a plugin that wants them names CDI
// devices whose hook makes them. Nodes get r and w: the kubelet's runtime
// makes them, so the container needs no mknod (m) for them.
func (e Edits) Allocation() Allocation {
	a := Allocation{Env: map[string]string{}}
	for _, d := range append([]Device{e.Node}, e.Devices...) {
		if d.Path == "" {
			continue
		}
		a.Devices = append(a.Devices, KubeletDevice{HostPath: d.Node.Path, ContainerPath: d.Path, Permissions: strings.ReplaceAll(d.Access, "m", "")})
	}
	for _, m := range e.Mounts {
		a.Mounts = append(a.Mounts, KubeletMount{HostPath: m.Source, ContainerPath: m.Target})
	}
	for _, kv := range e.Env {
		k, v, _ := strings.Cut(kv, "=")
		a.Env[k] = v
	}
	return a
}
