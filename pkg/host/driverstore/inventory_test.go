package driverstore

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/fixture"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/simhost"
)

// fixtureHost builds profile name's host tree and returns its options:
// with stand-ins for the ELF objects (no gcc) unless compiled.
func fixtureHost(t testing.TB, name string, compiled bool, omit ...string) (Options, simhost.Profile) {
	t.Helper()
	p, err := simhost.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	dir := fixture.Host(t, name, fixture.Options{Stubs: !compiled, Omit: omit})
	return Options{LibDir: filepath.Join(dir, fixture.LibDir), DriversDir: filepath.Join(dir, fixture.DriversDir)}, p
}

var kindVendor = map[simhost.FolderKind]Vendor{
	simhost.FolderNVIDIA: NVIDIA, simhost.FolderAMD: AMD, simhost.FolderIntel: Intel, simhost.FolderNPU: Intel,
	simhost.FolderQualcomm: Qualcomm, simhost.FolderHexagon: Qualcomm, simhost.FolderXDNA: AMD,
}

func TestBuildProfiles(t *testing.T) {
	for _, name := range simhost.Names() {
		t.Run(name, func(t *testing.T) {
			opt, p := fixtureHost(t, name, false)
			inv, err := Build(fixture.Adapters(p), opt)
			if err != nil {
				t.Fatal(err)
			}
			if inv.LibDir != opt.LibDir || inv.DriversDir != opt.DriversDir {
				t.Errorf("inventory dirs %s %s, want %s %s", inv.LibDir, inv.DriversDir, opt.LibDir, opt.DriversDir)
			}
			if len(inv.Adapters) != len(p.Adapters) {
				t.Fatalf("%d adapters, want %d", len(inv.Adapters), len(p.Adapters))
			}
			var wantFolders []Folder
			for i, a := range inv.Adapters {
				pa := p.Adapters[i]
				if a.Err != nil || a.Folder != pa.Folder || a.Vendor != kindVendor[pa.Kind] || a.Index != i || a.DriverStorePath != pa.DriverStorePath {
					t.Errorf("adapter %d: folder %q vendor %q err %v; want folder %q vendor %q", i, a.Folder, a.Vendor, a.Err, pa.Folder, kindVendor[pa.Kind])
				}
				j := slices.IndexFunc(wantFolders, func(f Folder) bool { return f.Name == pa.Folder })
				if j < 0 {
					wantFolders = append(wantFolders, Folder{Name: pa.Folder, HostPath: filepath.Join(opt.DriversDir, pa.Folder), Vendor: kindVendor[pa.Kind]})
					j = len(wantFolders) - 1
				}
				wantFolders[j].Adapters = append(wantFolders[j].Adapters, i)
			}
			if !reflect.DeepEqual(inv.Folders, wantFolders) {
				t.Errorf("folders\n%+v\nwant\n%+v", inv.Folders, wantFolders)
			}
			if inv.LibFiles != nil {
				t.Errorf("LibFiles listed without ListFiles: %v", inv.LibFiles)
			}
		})
	}
}

// TestBuildCaseInsensitive guards the Intel NPU case: the host says
// KIPUDRV.INF_AMD64_..., the folder on disk is lower case.
func TestBuildCaseInsensitive(t *testing.T) {
	opt, p := fixtureHost(t, "intel-npu", false)
	inv, err := Build(fixture.Adapters(p), opt)
	if err != nil {
		t.Fatal(err)
	}
	npu := inv.Adapters[1]
	if !strings.Contains(npu.DriverStorePath, "KIPUDRV.INF") || npu.Folder != "kipudrv.inf_amd64_5d9e7c7a1b3f2e08" || npu.Err != nil {
		t.Errorf("NPU: path %q -> folder %q, err %v", npu.DriverStorePath, npu.Folder, npu.Err)
	}
	if npu.Registry != "KIPUDRV.INF_AMD64_5D9E7C7A1B3F2E08" {
		t.Errorf("NPU: registry spelling %q, want the host's KIPUDRV.INF_AMD64_5D9E7C7A1B3F2E08", npu.Registry)
	}
}

func TestBuildMissingFolder(t *testing.T) {
	opt, p := fixtureHost(t, "nvidia-laptop", false, "nvltwi.inf_amd64_7b2a5c1c4e6f8d90")
	inv, err := Build(fixture.Adapters(p), opt)
	if err != nil {
		t.Fatal(err)
	}
	intel, nv := inv.Adapters[0], inv.Adapters[1]
	if intel.Err != nil || intel.Folder == "" {
		t.Errorf("the Intel adapter suffers from the missing NVIDIA folder: %v", intel.Err)
	}
	want := `adapter 1 (NVIDIA GeForce RTX 3060 Laptop GPU, LUID 0x4486d1): driver store folder "nvltwi.inf_amd64_7b2a5c1c4e6f8d90" was not found under ` +
		opt.DriversDir + `: the Windows driver was probably updated while WSL was running: run wsl --shutdown`
	if nv.Err == nil || nv.Err.Error() != want {
		t.Errorf("NVIDIA adapter error\n%v\nwant\n%s", nv.Err, want)
	}
	if !errors.Is(nv.Err, fs.ErrNotExist) || nv.Folder != "" || nv.Vendor != NVIDIA {
		t.Errorf("NVIDIA adapter: folder %q vendor %q, errors.Is(ErrNotExist) = %v", nv.Folder, nv.Vendor, errors.Is(nv.Err, fs.ErrNotExist))
	}
	if len(inv.Folders) != 1 || inv.Folders[0].Name != intel.Folder {
		t.Errorf("folders %+v, want only the Intel one", inv.Folders)
	}
}

func TestBuildLibDir(t *testing.T) {
	base := t.TempDir()
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	locked := filepath.Join(base, "locked")
	if err := os.Mkdir(locked, 0o700); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, lib, want string }{
		{"missing", filepath.Join(base, "lib"), filepath.Join(base, "lib") + " does not exist: WSL mounts its GPU libraries there: run this inside WSL2 with a current Windows GPU driver, or set lib_dir in the config"},
		{"not a dir", file, file + " is not a directory: point lib_dir in the config at WSL's GPU library mount"},
		{"root only", locked, locked + " is not readable by everyone (mode 0700), so a container whose user is not host root could not load the GPU libraries from it: make it readable by everyone (r-x), as WSL mounts it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv, err := Build(nil, Options{LibDir: tt.lib, DriversDir: base})
			if err == nil || err.Error() != tt.want {
				t.Fatalf("Build = %v, %v\nwant error %s", inv, err, tt.want)
			}
		})
	}
}

func store(folder string) string {
	return `\SystemRoot\System32\DriverStore\FileRepository\` + folder
}

func TestBuildFolders(t *testing.T) {
	type want struct {
		folder string
		vendor Vendor
		err    string // the whole message; DRIVERS stands for the drivers dir
		is     error
	}
	tests := []struct {
		name     string
		tree     []string
		adapters []dxcore.Adapter
		want     []want
		folders  map[string][]int
	}{
		{
			name: "shared folder deduplicated",
			tree: []string{"dir drivers/nv_dispi.inf_amd64_1"},
			adapters: []dxcore.Adapter{
				{Index: 0, PCI: dxcore.PCIIDs{Vendor: 0x10de}, DriverStorePath: store("nv_dispi.inf_amd64_1")},
				{Index: 1, PCI: dxcore.PCIIDs{Vendor: 0x10de}, DriverStorePath: `C:\Windows\System32\DriverStore\FileRepository\NV_DISPI.INF_AMD64_1`},
			},
			want:    []want{{folder: "nv_dispi.inf_amd64_1", vendor: NVIDIA}, {folder: "nv_dispi.inf_amd64_1", vendor: NVIDIA}},
			folders: map[string][]int{"nv_dispi.inf_amd64_1": {0, 1}},
		},
		{
			// Windows on Arm: ACPI vendor "QCOM", arm64 package folders.
			name: "snapdragon: qualcomm GPU and NPU in arm64 folders",
			tree: []string{"dir drivers/qcdxkmsuc8380.inf_arm64_9a0f6b4e21c3d857", "dir drivers/qcnspmcdm8380.inf_arm64_4e7d2c19b0a85f36"},
			adapters: []dxcore.Adapter{
				{Index: 0, PCI: dxcore.PCIIDs{Vendor: 0x4D4F4351, Device: 0x36334330}, DriverStorePath: store("qcdxkmsuc8380.inf_arm64_9a0f6b4e21c3d857")},
				{Index: 1, PCI: dxcore.PCIIDs{Vendor: 0x4D4F4351, Device: 0x41304430}, DriverStorePath: store("QCNSPMCDM8380.INF_ARM64_4E7D2C19B0A85F36")},
			},
			want:    []want{{folder: "qcdxkmsuc8380.inf_arm64_9a0f6b4e21c3d857", vendor: Qualcomm}, {folder: "qcnspmcdm8380.inf_arm64_4e7d2c19b0a85f36", vendor: Qualcomm}},
			folders: map[string][]int{"qcdxkmsuc8380.inf_arm64_9a0f6b4e21c3d857": {0}, "qcnspmcdm8380.inf_arm64_4e7d2c19b0a85f36": {1}},
		},
		{
			name: "unknown PCI vendor classified by libcuda.so.1.1",
			tree: []string{"file drivers/nv.inf_amd64_1/libcuda.so.1.1 x", "dir drivers/other.inf_amd64_2", "symlink drivers/fake.inf_amd64_3/libcuda.so.1.1 /etc/passwd"},
			adapters: []dxcore.Adapter{
				{Index: 0, DriverStorePath: store("nv.inf_amd64_1")},
				{Index: 1, PCI: dxcore.PCIIDs{Vendor: 0x1ed5}, DriverStorePath: store("other.inf_amd64_2")},
				{Index: 2, DriverStorePath: store("fake.inf_amd64_3")},
			},
			want:    []want{{folder: "nv.inf_amd64_1", vendor: NVIDIA}, {folder: "other.inf_amd64_2", vendor: Unknown}, {folder: "fake.inf_amd64_3", vendor: Unknown}},
			folders: map[string][]int{"nv.inf_amd64_1": {0}, "other.inf_amd64_2": {1}, "fake.inf_amd64_3": {2}},
		},
		{
			name: "symlinked folder refused",
			tree: []string{"dir outside", "symlink drivers/nv.inf_amd64_1 ROOT/outside"},
			adapters: []dxcore.Adapter{
				{Index: 0, LUID: dxcore.LUID{Low: 0x10}, Description: "GPU", DriverStorePath: store("nv.inf_amd64_1")},
			},
			want: []want{{err: `adapter 0 (GPU, LUID 0x10): driver store folder "nv.inf_amd64_1" under DRIVERS is a symlink: refusing it: make sure DRIVERS is WSL's own mount of the driver store`, is: ErrSymlink}},
		},
		{
			name: "symlink found ignoring case refused",
			tree: []string{"dir outside", "symlink drivers/nv.inf_amd64_1 ROOT/outside"},
			adapters: []dxcore.Adapter{
				{Index: 0, LUID: dxcore.LUID{Low: 0x10}, DriverStorePath: store("NV.INF_AMD64_1")},
			},
			want: []want{{err: `adapter 0 (LUID 0x10): driver store folder "NV.INF_AMD64_1" under DRIVERS is a symlink: refusing it: make sure DRIVERS is WSL's own mount of the driver store`, is: ErrSymlink}},
		},
		{
			name: "symlinked parent of a subfolder refused",
			tree: []string{"dir outside/lib", "symlink drivers/nv.inf_amd64_1 ROOT/outside"},
			adapters: []dxcore.Adapter{
				{Index: 0, DriverStorePath: store(`nv.inf_amd64_1\lib`)},
			},
			want: []want{{err: `adapter 0 (LUID 0x0): driver store folder "nv.inf_amd64_1/lib" under DRIVERS is a symlink: refusing it: make sure DRIVERS is WSL's own mount of the driver store`, is: ErrSymlink}},
		},
		{
			name: "file instead of a folder",
			tree: []string{"file drivers/nv.inf_amd64_1"},
			adapters: []dxcore.Adapter{
				{Index: 0, DriverStorePath: store("nv.inf_amd64_1")},
			},
			want: []want{{err: `adapter 0 (LUID 0x0): driver store folder "nv.inf_amd64_1" under DRIVERS is not a directory: refusing it: make sure DRIVERS is WSL's own mount of the driver store`, is: ErrNotDir}},
		},
		{
			// Root could read them, a container's ordinary user could not.
			name: "folders not readable by everyone refused",
			tree: []string{"dir drivers/nv.inf_amd64_1", "mode drivers/nv.inf_amd64_1 0750", "dir drivers/ig.inf_amd64_2", "mode drivers/ig.inf_amd64_2 0551",
				"dir drivers/npu.inf_amd64_3", "mode drivers/npu.inf_amd64_3 0555"},
			adapters: []dxcore.Adapter{
				{Index: 0, PCI: dxcore.PCIIDs{Vendor: 0x10de}, DriverStorePath: store("nv.inf_amd64_1")},
				{Index: 1, PCI: dxcore.PCIIDs{Vendor: 0x8086}, DriverStorePath: store("ig.inf_amd64_2")},
				{Index: 2, PCI: dxcore.PCIIDs{Vendor: 0x8086}, DriverStorePath: store("npu.inf_amd64_3")},
			},
			want: []want{
				{vendor: NVIDIA, err: `adapter 0 (LUID 0x0): driver store folder "nv.inf_amd64_1" under DRIVERS is not readable by everyone (mode 0750), so a container whose user is not host root could not load the driver from it: make it readable by everyone (r-x), as WSL mounts it`, is: ErrUnreadable},
				{vendor: Intel, err: `adapter 1 (LUID 0x0): driver store folder "ig.inf_amd64_2" under DRIVERS is not readable by everyone (mode 0551), so a container whose user is not host root could not load the driver from it: make it readable by everyone (r-x), as WSL mounts it`, is: ErrUnreadable},
				{folder: "npu.inf_amd64_3", vendor: Intel},
			},
			folders: map[string][]int{"npu.inf_amd64_3": {2}},
		},
		{
			name: "case-insensitive match ambiguous",
			tree: []string{"dir drivers/Nv.inf_amd64_1", "dir drivers/nV.inf_amd64_1"},
			adapters: []dxcore.Adapter{
				{Index: 0, DriverStorePath: store("NV.INF_AMD64_1")},
			},
			want: []want{{err: `adapter 0 (LUID 0x0): driver store folder "NV.INF_AMD64_1" under DRIVERS matches several folders that differ only in case (Nv.inf_amd64_1, nV.inf_amd64_1): remove the stale one or run wsl --shutdown`, is: ErrAmbiguous}},
		},
		{
			name: "exact name preferred over case variants",
			tree: []string{"dir drivers/Nv.inf_amd64_1", "dir drivers/nv.inf_amd64_1"},
			adapters: []dxcore.Adapter{
				{Index: 0, PCI: dxcore.PCIIDs{Vendor: 0x10de}, DriverStorePath: store("nv.inf_amd64_1")},
			},
			want:    []want{{folder: "nv.inf_amd64_1", vendor: NVIDIA}},
			folders: map[string][]int{"nv.inf_amd64_1": {0}},
		},
		{
			name: "unusable host path",
			tree: []string{"dir drivers"},
			adapters: []dxcore.Adapter{
				{Index: 3, LUID: dxcore.LUID{Low: 0x20}, PCI: dxcore.PCIIDs{Vendor: 0x8086}, DriverStorePath: store(`..\..\etc`)},
				{Index: 4, LUID: dxcore.LUID{Low: 0x21}, PCI: dxcore.PCIIDs{Vendor: 0x1002}},
			},
			want: []want{
				{vendor: Intel, err: `adapter 3 (LUID 0x20): driver store path "\\SystemRoot\\System32\\DriverStore\\FileRepository\\..\\..\\etc": component ".." contains "..": update or reinstall the adapter's Windows driver`, is: ErrBadPath},
				{vendor: AMD, err: `adapter 4 (LUID 0x21): empty driver store path: update or reinstall the adapter's Windows driver`, is: ErrBadPath},
			},
		},
		{
			name: "drivers dir missing",
			adapters: []dxcore.Adapter{
				{Index: 0, PCI: dxcore.PCIIDs{Vendor: 0x10de}, DriverStorePath: store("nv.inf_amd64_1")},
			},
			want: []want{{vendor: NVIDIA, err: `adapter 0 (LUID 0x0): driver store folder "nv.inf_amd64_1" was not found: the drivers dir DRIVERS does not exist: WSL mounts it for GPU drivers: run wsl --shutdown, or set drivers_dir in the config`, is: fs.ErrNotExist}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			lines := []string{"dir lib"}
			for _, l := range tt.tree {
				lines = append(lines, strings.ReplaceAll(l, "ROOT", root))
			}
			fixture.Tree(t, root, lines...)
			drivers := filepath.Join(root, "drivers")
			inv, err := Build(tt.adapters, Options{LibDir: filepath.Join(root, "lib"), DriversDir: drivers})
			if err != nil {
				t.Fatal(err)
			}
			for i, w := range tt.want {
				a := inv.Adapters[i]
				if a.Index != tt.adapters[i].Index {
					t.Errorf("adapter %d has index %d, want %d", i, a.Index, tt.adapters[i].Index)
				}
				if a.Folder != w.folder || (w.vendor != "" && a.Vendor != w.vendor) {
					t.Errorf("adapter %d: folder %q vendor %q, want %q %q", i, a.Folder, a.Vendor, w.folder, w.vendor)
				}
				wantErr := strings.ReplaceAll(w.err, "DRIVERS", drivers)
				if got := errString(a.Err); got != wantErr {
					t.Errorf("adapter %d error\n%s\nwant\n%s", i, got, wantErr)
				}
				if w.is != nil && !errors.Is(a.Err, w.is) {
					t.Errorf("adapter %d: errors.Is(%v, %v) is false", i, a.Err, w.is)
				}
				var fe *FolderError
				if a.Err != nil && !errors.As(a.Err, &fe) {
					t.Errorf("adapter %d: error %T is not a *FolderError", i, a.Err)
				}
			}
			got := map[string][]int{}
			for _, f := range inv.Folders {
				if f.HostPath != filepath.Join(drivers, f.Name) {
					t.Errorf("folder %s host path %s", f.Name, f.HostPath)
				}
				got[f.Name] = f.Adapters
			}
			if len(got) != len(tt.folders) || (len(got) > 0 && !reflect.DeepEqual(got, tt.folders)) {
				t.Errorf("folders %v, want %v", got, tt.folders)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestBuildListFiles(t *testing.T) {
	opt, p := fixtureHost(t, "nvidia-laptop", true) // SONAMEs need real ELF
	opt.ListFiles = true
	inv, err := Build(fixture.Adapters(p), opt)
	if err != nil {
		t.Fatal(err)
	}
	lib := map[string]File{}
	for _, f := range inv.LibFiles {
		lib[f.Name] = f
	}
	for _, w := range []File{
		{Name: "libcuda.so", Kind: SharedObject, Soname: "libcuda.so.1"},
		{Name: "libcuda.so.1", Kind: SharedObject, Soname: "libcuda.so.1"},
		{Name: "libcuda.so.1.1", Kind: SharedObject, Soname: "libcuda.so.1"},
		{Name: "libdxcore.so", Kind: SharedObject, Soname: "libdxcore.so"},
		{Name: "libd3d12.so", Kind: SharedObject, Soname: "libd3d12.so"},
		{Name: "libnvidia-ml.so.1", Kind: SharedObject, Soname: "libnvidia-ml.so.1"},
		{Name: "nvidia-smi", Kind: Executable},
	} {
		if lib[w.Name] != w {
			t.Errorf("lib dir file %s = %+v, want %+v", w.Name, lib[w.Name], w)
		}
	}
	if len(inv.LibFiles) != 19 {
		t.Errorf("lib dir lists %d files, want the fixture's 19: %v", len(inv.LibFiles), inv.LibFiles)
	}

	want := map[string][]File{
		"iigd_dch.inf_amd64_ba2ab4a3e0e0b2ea": nil, // Windows files only
		"nvltwi.inf_amd64_7b2a5c1c4e6f8d90": {
			{Name: "libcuda.so.1.1", Kind: SharedObject, Soname: "libcuda.so.1"},
			{Name: "libcuda_loader.so", Kind: SharedObject, Soname: "libcuda_loader.so"},
			{Name: "libnvdxgdmal.so.1", Kind: SharedObject, Soname: "libnvdxgdmal.so.1"},
			{Name: "libnvidia-ml.so.1", Kind: SharedObject, Soname: "libnvidia-ml.so.1"},
			{Name: "libnvidia-ml_loader.so", Kind: SharedObject, Soname: "libnvidia-ml_loader.so"},
			{Name: "libnvidia-ptxjitcompiler.so.1", Kind: SharedObject, Soname: "libnvidia-ptxjitcompiler.so.1"},
			{Name: "nvcubins.bin", Kind: Data},
			{Name: "nvidia-smi", Kind: Executable},
		},
	}
	for _, f := range inv.Folders {
		if !reflect.DeepEqual(f.Files, want[f.Name]) {
			t.Errorf("folder %s files\n%+v\nwant\n%+v", f.Name, f.Files, want[f.Name])
		}
	}
}

func TestListFilesSkips(t *testing.T) {
	root := t.TempDir()
	fixture.Tree(t, root, "file nvlddmkm.sys x", "file empty", "dir sub.so", "symlink link.so /usr/lib/x86_64-linux-gnu/libc.so.6")
	if err := os.WriteFile(filepath.Join(root, "broken.so"), []byte("\x7fELF\x02\x01"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ListFiles(root)
	if err == nil || !strings.Contains(err.Error(), "broken.so is a damaged ELF file") {
		t.Errorf("ListFiles with a truncated ELF: %v", err)
	}
	if err := os.Remove(filepath.Join(root, "broken.so")); err != nil {
		t.Fatal(err)
	}
	files, err := ListFiles(root)
	if err != nil || len(files) != 0 {
		t.Errorf("ListFiles = %v, %v; want nothing (Windows file, empty file, dir, symlink)", files, err)
	}
}

func BenchmarkBuild(b *testing.B) {
	opt, p := fixtureHost(b, "nvidia-laptop", true)
	as := fixture.Adapters(p)
	for b.Loop() {
		inv, err := Build(as, opt)
		if err != nil || len(inv.Folders) != 2 {
			b.Fatal(inv, err)
		}
	}
}
