package main

// The hook's own view through dxgsim: what `wsl-gpu-hook info` reports on
// every profile and under every fault. These tie the simulator to the
// client it exists for.

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/fixture"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/simhost"
)

// host lays out the fixture of profile p and a config pointing at it.
func (tl *tools) host(t *testing.T, p simhost.Profile) (cfg, dev string) {
	t.Helper()
	root := fixture.Host(t, p.Name, fixture.Options{})
	dev = filepath.Join(worldDir(t), "dxg")
	cfg = filepath.Join(worldDir(t), "config.toml")
	if err := (fixture.Config{Dxg: dev, Host: root}).Write(cfg); err != nil {
		t.Fatal(err)
	}
	return cfg, dev
}

type infoJSON struct {
	Ioctl    string `json:"ioctl"`
	Adapters []struct {
		Index    int    `json:"index"`
		Vendor   string `json:"vendor"`
		DeviceID string `json:"deviceId"`
		PCIID    string `json:"pciId"`
		LUID     string `json:"luid"`
		Folder   string `json:"folder"`
		Error    string `json:"error"`
	} `json:"adapters"`
	Skipped []string `json:"skipped"`
}

var vendorNames = map[uint32]string{simhost.VendorNVIDIA: "nvidia", simhost.VendorAMD: "amd", simhost.VendorAMDCPU: "amd", simhost.VendorIntel: "intel", simhost.VendorMicrosoft: "microsoft", simhost.VendorQualcomm: "qualcomm"}

// Every profile: info lists every adapter with the right vendor, LUID and
// folder as it is on disk (the host may spell it in another case).
func TestInfoEveryProfile(t *testing.T) {
	tl := build(t, true)
	for _, name := range simhost.Names() {
		t.Run(name, func(t *testing.T) {
			p, _ := simhost.Lookup(name)
			cfg, dev := tl.host(t, p)
			r := tl.run(t, []string{"--profile", name, "--dev", dev}, tl.hook, "--config", cfg, "info", "--json")
			if len(p.Adapters) == 0 {
				want := "wsl-gpu-hook: info: no GPU adapters: the Windows host exposes none to WSL: install or update the Windows GPU driver, then run wsl --shutdown\n"
				if r.code != 1 || r.stderr != want {
					t.Fatalf("exit %d, stderr %q; want 1, %q", r.code, r.stderr, want)
				}
				return
			}
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			var info infoJSON
			if err := json.Unmarshal([]byte(r.stdout), &info); err != nil {
				t.Fatalf("info --json: %v\n%s", err, r.stdout)
			}
			if len(info.Adapters) != len(p.Adapters) || info.Ioctl != "ENUMADAPTERS3" {
				t.Fatalf("%d adapters via %s, want %d via ENUMADAPTERS3", len(info.Adapters), info.Ioctl, len(p.Adapters))
			}
			for i, a := range p.Adapters {
				got := info.Adapters[i]
				want := fmt.Sprintf("%d %s 0x%04x 0x%x %s", i, vendorNames[a.VendorID], a.DeviceID, a.LUIDLow, a.Folder)
				if g := fmt.Sprintf("%d %s %s %s %s", got.Index, got.Vendor, got.DeviceID, got.LUID, got.Folder); g != want || got.Error != "" {
					t.Errorf("adapter %d = %s (%s), want %s", i, g, got.Error, want)
				}
				// What people read: vendor:device, or the ACPI id Windows on
				// Arm reports (QCOM and four characters), not its bytes in hex.
				pci := fmt.Sprintf("%04x:%04x", a.VendorID, a.DeviceID)
				if a.VendorID == simhost.VendorQualcomm {
					pci = "QCOM" + string([]byte{byte(a.DeviceID), byte(a.DeviceID >> 8), byte(a.DeviceID >> 16), byte(a.DeviceID >> 24)})
				}
				if got.PCIID != pci {
					t.Errorf("adapter %d: pciId %q, want %q", i, got.PCIID, pci)
				}
			}
		})
	}
}

// A Ryzen AI laptop: info's KIND column says the XDNA NPU is an npu and
// the Radeon a gpu, as the device plugin, DRA and the labels take them.
func TestInfoRyzenAINPU(t *testing.T) {
	tl := build(t, true)
	p, _ := simhost.Lookup("ryzen-ai")
	cfg, dev := tl.host(t, p)
	r := tl.run(t, []string{"--profile", p.Name, "--dev", dev}, tl.hook, "--config", cfg, "info")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var got []string
	for _, line := range strings.Split(r.stdout, "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (f[0] == "0" || f[0] == "1") {
			got = append(got, strings.Join(f[1:5], " "))
		}
	}
	want := []string{"amd-150e-1f631043-0 gpu amd 1002:150e", "amd-17f0-1f631043-0 npu amd 1022:17f0"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("info rows (ID KIND VENDOR PCI ID):\n%s\nwant:\n%s\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), r.stdout)
	}
}

// Every fault mode gives its one clear line or its warning, and never a
// protocol misuse.
func TestInfoFaults(t *testing.T) {
	tl := build(t, true)
	p, _ := simhost.Lookup("nvidia-laptop")
	cfg, dev := tl.host(t, p)
	tests := []struct {
		fault     []string
		code      int
		stderr    string // exact, when the command fails
		stdoutHas string
		jsonIoctl string
		nAdapters int
	}{
		{fault: []string{"old-kernel"}, jsonIoctl: "ENUMADAPTERS2", nAdapters: 2},
		{fault: []string{"query-fail=1"}, nAdapters: 1, stdoutHas: `"skipped": [`},
		{fault: []string{"query-fail=1", "ntstatus"}, nAdapters: 1, stdoutHas: "NTSTATUS 0xC00002B6 (STATUS_DEVICE_REMOVED)"},
		{fault: []string{"missing-folder=1"}, nAdapters: 2, stdoutHas: `driver store folder \"nvltwi.inf_amd64_84d5a3e3b190726f\" was not found under`},
		{fault: []string{"zero-adapters"}, code: 1, stderr: "wsl-gpu-hook: info: no GPU adapters: the Windows host exposes none to WSL: install or update the Windows GPU driver, then run wsl --shutdown\n"},
		{fault: []string{"denied"}, code: 1, stderr: "wsl-gpu-hook: info: open " + dev + ": permission denied: the GPU device is not accessible to this user: run as root or make /dev/dxg mode 0666 (WSL's default)\n"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.fault, ","), func(t *testing.T) {
			args := []string{"--profile", "nvidia-laptop", "--dev", dev}
			for _, f := range tt.fault {
				args = append(args, "--fault", f)
			}
			r := tl.run(t, args, tl.hook, "--config", cfg, "info", "--json")
			if r.code != tt.code {
				t.Fatalf("exit %d, want %d; stderr %s", r.code, tt.code, r.stderr)
			}
			if tt.code != 0 {
				if r.stderr != tt.stderr {
					t.Fatalf("stderr %q\nwant   %q", r.stderr, tt.stderr)
				}
				return
			}
			var info infoJSON
			if err := json.Unmarshal([]byte(r.stdout), &info); err != nil {
				t.Fatalf("info --json: %v\n%s", err, r.stdout)
			}
			if len(info.Adapters) != tt.nAdapters || (tt.jsonIoctl != "" && info.Ioctl != tt.jsonIoctl) {
				t.Fatalf("%d adapters via %s", len(info.Adapters), info.Ioctl)
			}
			if !strings.Contains(r.stdout, tt.stdoutHas) {
				t.Fatalf("output lacks %q:\n%s", tt.stdoutHas, r.stdout)
			}
		})
	}
	// ENUMADAPTERS2 never lists compute-only adapters: an old kernel on an
	// MCDM-only host has none to offer.
	t.Run("compute-only on an old kernel", func(t *testing.T) {
		p, _ := simhost.Lookup("compute-only")
		cfg, dev := tl.host(t, p)
		r := tl.run(t, []string{"--profile", "compute-only", "--dev", dev, "--fault", "old-kernel"}, tl.hook, "--config", cfg, "info")
		if r.code != 1 || !strings.Contains(r.stderr, "no GPU adapters") {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
	})
}
