package devcgroup

import (
	"errors"
	"fmt"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	devconfig "github.com/opencontainers/cgroups/devices/config"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/devnode"
)

// targetRules is the rule list the runtime applied for a container whose
// bundle has the given linux.resources.devices, followed by an rwm allow rule
// for each of devs. Converting the spec rules follows runc's specconv: no
// type means all types, no major or minor means any, an empty access is
// invalid.
func targetRules(spec []specs.LinuxDeviceCgroup, devs ...devnode.Node) ([]*devconfig.Rule, error) {
	defaults := runtimeDefaults()
	rules := make([]*devconfig.Rule, 0, len(spec)+len(defaults)+len(devs))
	var errs []error
	for i, s := range spec {
		r, err := specRule(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("linux.resources.devices[%d]: %w", i, err))
			continue
		}
		rules = append(rules, r)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	rules = append(rules, defaults...)
	for _, dev := range devs {
		rules = append(rules, &devconfig.Rule{
			Type: devconfig.CharDevice, Major: int64(dev.Major), Minor: int64(dev.Minor),
			Permissions: "rwm", Allow: true,
		})
	}
	return rules, nil
}

func specRule(s specs.LinuxDeviceCgroup) (*devconfig.Rule, error) {
	r := &devconfig.Rule{
		Type:        devconfig.WildcardDevice,
		Major:       devconfig.Wildcard,
		Minor:       devconfig.Wildcard,
		Permissions: devconfig.Permissions(s.Access),
		Allow:       s.Allow,
	}
	switch s.Type {
	case "", "a":
	case "b":
		r.Type = devconfig.BlockDevice
	case "c":
		r.Type = devconfig.CharDevice
	default:
		return nil, fmt.Errorf("type %q: want \"a\", \"b\" or \"c\"", s.Type)
	}
	if s.Major != nil {
		r.Major = *s.Major
	}
	if s.Minor != nil {
		r.Minor = *s.Minor
	}
	if r.Permissions.IsEmpty() || !r.Permissions.IsValid() {
		return nil, fmt.Errorf("access %q: want a combination of r, w and m", s.Access)
	}
	return r, nil
}

// runtimeDefaults are the rules runc appends after the spec's own
// (libcontainer/specconv AllowedDevices). runc 1.2.0-1.2.3 lacked tun; crun
// adds /dev/console (5:1), which a crun container on cgroup v2 therefore
// loses here (its console is normally a pts device anyway). runc also drops
// a default whose path the spec's linux.devices lists again; such a device
// keeps its default rule here.
func runtimeDefaults() []*devconfig.Rule {
	c := func(major, minor int64, perms devconfig.Permissions) *devconfig.Rule {
		return &devconfig.Rule{Type: devconfig.CharDevice, Major: major, Minor: minor, Permissions: perms, Allow: true}
	}
	wild := int64(devconfig.Wildcard)
	return []*devconfig.Rule{
		c(wild, wild, "m"), // mknod of any character device
		{Type: devconfig.BlockDevice, Major: wild, Minor: wild, Permissions: "m", Allow: true},
		c(1, 3, "rwm"),      // /dev/null
		c(1, 8, "rwm"),      // /dev/random
		c(1, 7, "rwm"),      // /dev/full
		c(5, 0, "rwm"),      // /dev/tty
		c(1, 5, "rwm"),      // /dev/zero
		c(1, 9, "rwm"),      // /dev/urandom
		c(136, wild, "rwm"), // /dev/pts/*
		c(5, 2, "rwm"),      // /dev/ptmx
		c(10, 200, "rwm"),   // /dev/net/tun
	}
}
