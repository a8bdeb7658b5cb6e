package hookroot

import (
	"errors"
	"testing"
)

// TestCheck: the decision, from made-up stat results. A directory is the
// container's root filesystem when it is a mount root, not /, not the
// bundle, and the hook is not in pid 1's mount namespace; a fact that
// could not be learnt decides nothing but the mount root, which must be
// known.
func TestCheck(t *testing.T) {
	yes, no := true, false
	dir, root, bundle := FileID{1, 10}, FileID{1, 2}, FileID{1, 20}
	ns, initNS := FileID{4, 4026532000}, FileID{4, 4026531841}
	ok := Facts{Path: "/r", Dir: dir, MountRoot: &yes, Root: root, Bundle: &bundle, MountNS: ns, InitMountNS: &initNS}
	tests := []struct {
		name string
		edit func(f *Facts)
		want Reason // 0: taken
	}{
		{name: "runc: the root filesystem it bound onto itself", edit: func(*Facts) {}},
		{name: "a user namespace: pid 1's namespace unknown", edit: func(f *Facts) { f.InitMountNS = nil }},
		{name: "a user namespace: the bundle unreachable", edit: func(f *Facts) { f.Bundle = nil }},
		{name: "the host's /", edit: func(f *Facts) { f.Dir = root }, want: HostRoot},
		{name: "the bundle", edit: func(f *Facts) { f.Dir = bundle; f.MountRoot = &no }, want: Bundle},
		{name: "the bundle, a mount root", edit: func(f *Facts) { f.Dir = bundle }, want: Bundle},
		{name: "a plain directory", edit: func(f *Facts) { f.MountRoot = &no }, want: NotMountRoot},
		{name: "a kernel that does not say", edit: func(f *Facts) { f.MountRoot = nil }, want: MountRootUnknown},
		{name: "a mount root in the host's namespace", edit: func(f *Facts) { f.MountNS = initNS }, want: HostMountNS},
		{name: "/ beats everything", edit: func(f *Facts) { f.Dir = root; f.MountNS = initNS; f.Bundle = &root }, want: HostRoot},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := ok
			tt.edit(&f)
			err := Check(f)
			var re *RefusedError
			switch {
			case tt.want == 0 && err != nil:
				t.Errorf("refused: %v", err)
			case tt.want != 0 && (!errors.As(err, &re) || re.Reason != tt.want):
				t.Errorf("Check = %v, want reason %d", err, tt.want)
			}
		})
	}
}

// TestRefusedError pins the lines users read (after "wsl-gpu-hook:
// cdi-hook: ").
func TestRefusedError(t *testing.T) {
	tests := []struct {
		err  RefusedError
		want string
	}{
		{RefusedError{"/var/lib/x", WorkingDir, NotMountRoot},
			"the working directory /var/lib/x is not a mount root: the runtime ran the hook outside the container's root filesystem (runc and crun run it in the root filesystem they bound onto itself): run the container with runc or crun"},
		{RefusedError{"/run/c/b", WorkingDir, Bundle},
			"the working directory /run/c/b is the bundle: the runtime ran the hook there, not in the container's root filesystem: run the container with runc or crun"},
		{RefusedError{"/", WorkingDir, HostRoot},
			"the working directory / is the host's root directory: the runtime ran the hook outside the container's root filesystem: run the container with runc or crun"},
		{RefusedError{"/", StateRoot, HostRoot},
			"the state's root / is the host's root directory: the container runs on the host's own root (podman --rootfs /), where a CDI device would change the host: give the container a root filesystem of its own"},
		{RefusedError{"/b/rootfs", StateRoot, NotMountRoot},
			"the state's root /b/rootfs is not a mount root: the runtime ran the hook before it mounted the container's root filesystem (runc and crun bind it onto itself first): run the container with runc or crun"},
		{RefusedError{"/b", ConfigRoot, Bundle},
			"config.json's root.path /b is the bundle, not a root filesystem of its own: put the container's root filesystem in a directory of its own"},
		{RefusedError{"/r", WorkingDir, MountRootUnknown},
			"cannot tell whether the working directory /r is the container's root filesystem: the kernel does not say whether it is a mount root (Linux 5.8 and later do): update the kernel (on WSL: wsl --update)"},
		{RefusedError{"/r", WorkingDir, HostMountNS},
			"the hook runs in the host's mount namespace (pid 1's), not in the container's: the runtime ran the createContainer hook outside the container: run the container with runc or crun"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("%+v:\n got %s\nwant %s", tt.err, got, tt.want)
		}
	}
}
