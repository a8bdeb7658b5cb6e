package edits

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/devnode"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/ldcache"
)

// TestFor: the steps the hook applies for a typical container, in order:
// the node, the lib dir, the folders (a registry spelling mounted with the
// on-disk name linked to it), the loader files, nvidia-smi.
func TestFor(t *testing.T) {
	in := Inputs{
		Device:     devnode.Node{Path: "/dev/dxg", Major: 10, Minor: 53},
		LibDir:     "/usr/lib/wsl/lib",
		DriversDir: "/usr/lib/wsl/drivers",
		Folders:    []string{"nvltwi.inf_amd64_7b2a5c1c4e6f8d90", "iigd_dch.inf_amd64_ba2ab4a3e0e0b2ea"},
		NvidiaSmi:  "/usr/lib/wsl/lib/nvidia-smi",
		Ldcache:    []ldcache.Entry{{Key: "libcuda.so.1", Path: "/usr/lib/wsl/lib/libcuda.so.1"}, {Key: "libdxcore.so", Path: "/usr/lib/wsl/lib/libdxcore.so"}},
	}
	var got bytes.Buffer
	for _, s := range For(in).Steps(Done{}) {
		got.WriteString(s.String() + "\n")
	}
	want := `device /dev/dxg c 10:53 0666
bind /usr/lib/wsl/lib -> /usr/lib/wsl/lib (ro,nosuid,nodev)
bind /usr/lib/wsl/drivers/nvltwi.inf_amd64_7b2a5c1c4e6f8d90 -> /usr/lib/wsl/drivers/nvltwi.inf_amd64_7b2a5c1c4e6f8d90 (ro,nosuid,nodev)
bind /usr/lib/wsl/drivers/iigd_dch.inf_amd64_ba2ab4a3e0e0b2ea -> /usr/lib/wsl/drivers/iigd_dch.inf_amd64_ba2ab4a3e0e0b2ea (ro,nosuid,nodev)
file /etc/ld.so.conf.d/wsl-gpu-hook.conf (17 bytes)
ldcache /etc/ld.so.cache += [libcuda.so.1 libdxcore.so]
symlink /usr/bin/nvidia-smi -> /usr/lib/wsl/lib/nvidia-smi (if absent)
`
	if got.String() != want {
		t.Fatalf("plan:\n%s\nwant:\n%s", got.String(), want)
	}
	in.BindDevice = true
	if got := For(in).Steps(Done{})[0].String(); got != "device /dev/dxg c 10:53 bound from /dev/dxg" {
		t.Errorf("user-namespace device step = %q", got)
	}
	in.Folders = []string{"kipudrv.inf_amd64_5d9e"}
	in.Spellings = map[string]string{"kipudrv.inf_amd64_5d9e": "KIPUDRV.INF_AMD64_5D9E"}
	var folderSteps []string
	for _, s := range For(in).Steps(Done{})[2:4] {
		folderSteps = append(folderSteps, s.String())
	}
	if want := []string{
		"bind /usr/lib/wsl/drivers/kipudrv.inf_amd64_5d9e -> /usr/lib/wsl/drivers/KIPUDRV.INF_AMD64_5D9E (ro,nosuid,nodev)",
		"symlink /usr/lib/wsl/drivers/kipudrv.inf_amd64_5d9e -> KIPUDRV.INF_AMD64_5D9E (if absent)",
	}; !slices.Equal(folderSteps, want) {
		t.Errorf("a folder the registry spells differently:\n%s\nwant\n%s", strings.Join(folderSteps, "\n"), strings.Join(want, "\n"))
	}
	in.Ldcache, in.NvidiaSmi, in.Folders, in.Spellings = nil, "", nil, nil
	if n := len(For(in).Steps(Done{})); n != 3 {
		t.Fatalf("minimal plan has %d steps, want device, lib dir, conf", n)
	}
}
