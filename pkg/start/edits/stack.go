package edits

import "github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/ldcache"

// Stack is what a vendor stack or a capability adds besides the driver
// files, in this package's vocabulary (package vendorstack decides it):
// nodes, binds, variables with why each is set, loader-cache entries, and
// notes on what was left out.
type Stack struct {
	Mounts []Mount
	// Devices are the nodes (/dev/dri), with AccessStack; AddStack
	// decides whether they are bound.
	Devices []Device
	Env     []Var
	// Ldcache entries register container paths with the image's loader.
	Ldcache []ldcache.Entry
	// Notes say what was left out and why, one line each.
	Notes []string
}

// Var is one environment variable and why it is set.
type Var struct {
	Name, Value string
	// Why says what reads it, for the log and for users who must set it
	// themselves (a prestart hook cannot).
	Why string
}

func (v Var) String() string { return v.Name + "=" + v.Value }

// Empty reports a stack that changes nothing.
func (s Stack) Empty() bool {
	return len(s.Mounts) == 0 && len(s.Devices) == 0 && len(s.Env) == 0 && len(s.Ldcache) == 0
}

// EnvList returns the variables as NAME=VALUE.
func (s Stack) EnvList() []string {
	out := make([]string, len(s.Env))
	for i, v := range s.Env {
		out[i] = v.String()
	}
	return out
}

// Add appends o to s.
func (s *Stack) Add(o Stack) {
	s.Mounts = append(s.Mounts, o.Mounts...)
	s.Devices = append(s.Devices, o.Devices...)
	s.Env = append(s.Env, o.Env...)
	s.Ldcache = append(s.Ldcache, o.Ldcache...)
	s.Notes = append(s.Notes, o.Notes...)
}
