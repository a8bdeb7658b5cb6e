package devcgroup

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/devnode"
)

// wildcard stands for any major or minor number in a rule, as in runc's
// configuration (devices/config.Wildcard).
const wildcard = -1

// access is a set of device operations, as bits of the access_type the
// kernel passes a BPF_CGROUP_DEVICE program (include/uapi/linux/bpf.h:
// BPF_DEVCG_ACC_MKNOD, BPF_DEVCG_ACC_READ, BPF_DEVCG_ACC_WRITE).
type access uint8

const (
	accMknod access = unix.BPF_DEVCG_ACC_MKNOD
	accRead  access = unix.BPF_DEVCG_ACC_READ
	accWrite access = unix.BPF_DEVCG_ACC_WRITE
	accAll          = accRead | accWrite | accMknod
)

// String spells the set as a cgroup v1 rule does: a subsequence of "rwm".
func (a access) String() string {
	s := ""
	if a&accRead != 0 {
		s += "r"
	}
	if a&accWrite != 0 {
		s += "w"
	}
	if a&accMknod != 0 {
		s += "m"
	}
	return s
}

// parseAccess reads a spec's access string. Like runc's cgroups library
// (Permissions.IsValid), it takes only "r", "w", "m" in that order, each at
// most once, and not the empty string.
func parseAccess(s string) (access, bool) {
	var a access
	for _, c := range s {
		switch c {
		case 'r':
			a |= accRead
		case 'w':
			a |= accWrite
		case 'm':
			a |= accMknod
		default:
			return 0, false
		}
	}
	return a, s != "" && a.String() == s
}

// rule is one device cgroup rule, as runc applies it: typ 'a' (all devices,
// whatever its numbers and access say), 'b' or 'c'; major and minor a number
// or wildcard.
type rule struct {
	typ          byte
	major, minor int64
	access       access
	allow        bool
}

// String formats r as "allow c 1:3 rwm".
func (r rule) String() string {
	verb := "deny"
	if r.allow {
		verb = "allow"
	}
	num := func(n int64) string {
		if n == wildcard {
			return "*"
		}
		return strconv.FormatInt(n, 10)
	}
	return fmt.Sprintf("%s %c %s:%s %s", verb, r.typ, num(r.major), num(r.minor), r.access)
}

// targetRules is the rule list the runtime applied for a container whose
// bundle has the given linux.resources.devices, followed by an rwm allow rule
// for each of devs. Converting the spec rules follows runc's specconv: no
// type means all types, no major or minor means any, an empty access is
// invalid.
func targetRules(spec []specs.LinuxDeviceCgroup, devs ...devnode.Node) ([]rule, error) {
	defaults := runtimeDefaults()
	rules := make([]rule, 0, len(spec)+len(defaults)+len(devs))
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
		rules = append(rules, rule{typ: 'c', major: int64(dev.Major), minor: int64(dev.Minor), access: accAll, allow: true})
	}
	return rules, nil
}

func specRule(s specs.LinuxDeviceCgroup) (rule, error) {
	r := rule{typ: 'a', major: wildcard, minor: wildcard, allow: s.Allow}
	switch s.Type {
	case "", "a":
	case "b", "c":
		r.typ = s.Type[0]
	default:
		return rule{}, fmt.Errorf("type %q: want \"a\", \"b\" or \"c\"", s.Type)
	}
	// A device program compares 32-bit numbers; runc's generator refuses
	// larger ones, and a negative one other than the wildcard means nothing.
	for _, n := range []struct {
		name string
		v    *int64
		dst  *int64
	}{{"major", s.Major, &r.major}, {"minor", s.Minor, &r.minor}} {
		if n.v == nil {
			continue
		}
		if *n.v < wildcard || *n.v > math.MaxUint32 {
			return rule{}, fmt.Errorf("%s %d: want a number in [0, %d] or none for any", n.name, *n.v, uint32(math.MaxUint32))
		}
		*n.dst = *n.v
	}
	a, ok := parseAccess(s.Access)
	if !ok {
		return rule{}, fmt.Errorf("access %q: want a combination of r, w and m", s.Access)
	}
	r.access = a
	return r, nil
}

// runtimeDefaults are the rules runc appends after the spec's own
// (libcontainer/specconv AllowedDevices). runc 1.2.0-1.2.3 lacked tun; crun
// adds /dev/console (5:1), which a crun container on cgroup v2 therefore
// loses here (its console is normally a pts device anyway). runc also drops
// a default whose path the spec's linux.devices lists again; such a device
// keeps its default rule here.
func runtimeDefaults() []rule {
	c := func(major, minor int64, a access) rule {
		return rule{typ: 'c', major: major, minor: minor, access: a, allow: true}
	}
	return []rule{
		c(wildcard, wildcard, accMknod), // mknod of any character device
		{typ: 'b', major: wildcard, minor: wildcard, access: accMknod, allow: true},
		c(1, 3, accAll),          // /dev/null
		c(1, 8, accAll),          // /dev/random
		c(1, 7, accAll),          // /dev/full
		c(5, 0, accAll),          // /dev/tty
		c(1, 5, accAll),          // /dev/zero
		c(1, 9, accAll),          // /dev/urandom
		c(136, wildcard, accAll), // /dev/pts/*
		c(5, 2, accAll),          // /dev/ptmx
		c(10, 200, accAll),       // /dev/net/tun
	}
}
