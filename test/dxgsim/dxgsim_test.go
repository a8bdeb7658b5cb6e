package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/fixture"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/simhost"
)

// tools are built once per test binary.
type tools struct {
	dir, sim, hook, client string
}

func build(t *testing.T) *tools {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: dxgsim makes device nodes and installs seccomp listeners")
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not installed")
	}
	dir := worldDir(t)
	tl := &tools{dir: dir, sim: filepath.Join(dir, "dxgsim"), hook: filepath.Join(dir, "wsl-gpu-hook"), client: filepath.Join(dir, "client")}
	for _, c := range [][]string{
		{"go", "build", "-o", tl.sim, "."},
		{"go", "build", "-o", tl.hook, "../../cmd/wsl-gpu-hook"},
		{"gcc", "-O2", "-o", tl.client, "testdata/client.c"},
	} {
		cmd := exec.Command(c[0], c[1:]...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(c, " "), err, out)
		}
	}
	return tl
}

// host lays out the fixture of profile p and a config pointing at it.
func (tl *tools) host(t *testing.T, p simhost.Profile) (cfg, dev string) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "host")
	cache, _ := fixture.DefaultCacheDir()
	if err := fixture.Build(root, p, fixture.Options{CacheDir: cache}); err != nil {
		t.Fatal(err)
	}
	dev = filepath.Join(worldDir(t), "dxg")
	cfg = filepath.Join(worldDir(t), "config.toml")
	toml := fmt.Sprintf("dxg_device = %q\nlib_dir = %q\ndrivers_dir = %q\nlog_file = \"\"\n",
		dev, filepath.Join(root, fixture.LibDir), filepath.Join(root, fixture.DriversDir))
	if err := os.WriteFile(cfg, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg, dev
}

// worldDir is a temp dir the "denied" fault's unprivileged user can reach.
func worldDir(t *testing.T) string {
	d := t.TempDir()
	for _, p := range []string{filepath.Dir(d), d} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

type runResult struct {
	code           int
	stdout, stderr string
}

func (tl *tools) run(t *testing.T, simArgs []string, cmd ...string) runResult {
	t.Helper()
	c := exec.Command(tl.sim, append(append(simArgs, "--"), cmd...)...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return runResult{code, out.String(), errb.String()}
}

type infoJSON struct {
	Ioctl    string `json:"ioctl"`
	Adapters []struct {
		Index    int    `json:"index"`
		Vendor   string `json:"vendor"`
		DeviceID string `json:"deviceId"`
		LUID     string `json:"luid"`
		Folder   string `json:"folder"`
		Error    string `json:"error"`
	} `json:"adapters"`
	Skipped []string `json:"skipped"`
}

var vendorNames = map[uint32]string{simhost.VendorNVIDIA: "nvidia", simhost.VendorAMD: "amd", simhost.VendorIntel: "intel", simhost.VendorMicrosoft: "microsoft"}

// Every profile: info lists every adapter with the right vendor, LUID and
// folder as it is on disk (the host may spell it in another case).
func TestInfoEveryProfile(t *testing.T) {
	tl := build(t)
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
			}
		})
	}
}

// Every fault mode gives its one clear line or its warning, and never a
// protocol misuse.
func TestInfoFaults(t *testing.T) {
	tl := build(t)
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
		{fault: []string{"missing-folder=1"}, nAdapters: 2, stdoutHas: `driver store folder \"nvltwi.inf_amd64_ffffffffffffffff\" was not found under`},
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

// The simulator's own protocol, checked with an independent C client.
func TestProtocol(t *testing.T) {
	tl := build(t)
	dev := filepath.Join(t.TempDir(), "dxg")
	tests := []struct {
		profile, mode string
		code          int
		out, misuse   string
	}{
		{profile: "nvidia-laptop", mode: "ok", out: "0x1a1d77 0x40000000\n0x4486d1 0x40000040\n"},
		{profile: "intel-npu", mode: "ok", out: "0x13f2e 0x40000000\n0x13f71 0x40000040\n"},
		{profile: "intel-npu", mode: "enum2", out: "0x13f2e 0x40000000\n"}, // compute-only NPU left out
		{profile: "nvidia-laptop", mode: "overflow", out: "fill: Value too large for defined data type num=1\n"},
		{profile: "nvidia-laptop", mode: "toobig", out: "fill: Invalid argument\n"},
		{profile: "nvidia-laptop", mode: "badclose", out: "close: -1 Invalid argument\n"},
		{profile: "nvidia-laptop", mode: "leak", code: 3, misuse: "left 2 adapter handles open"},
		{profile: "nvidia-laptop", mode: "small", code: 3, misuse: "ENUMADAPTERS3 with capacity 1 below the 2 adapters"},
	}
	for _, tt := range tests {
		t.Run(tt.profile+"/"+tt.mode, func(t *testing.T) {
			r := tl.run(t, []string{"--profile", tt.profile, "--dev", dev}, tl.client, dev, tt.mode)
			if r.code != tt.code || (tt.out != "" && r.stdout != tt.out) {
				t.Fatalf("exit %d out %q stderr %q; want %d %q", r.code, r.stdout, r.stderr, tt.code, tt.out)
			}
			if tt.misuse != "" && !strings.Contains(r.stderr, "dxgsim: misuse: ") || !strings.Contains(r.stderr, tt.misuse) {
				t.Fatalf("stderr %q lacks misuse %q", r.stderr, tt.misuse)
			}
			if tt.misuse == "" && strings.Contains(r.stderr, "misuse") {
				t.Fatalf("unexpected misuse: %s", r.stderr)
			}
		})
	}
	// A dxg request number on another device goes to the real kernel.
	t.Run("other devices pass through", func(t *testing.T) {
		r := tl.run(t, []string{"--profile", "nvidia-laptop", "--dev", dev}, tl.client, "/dev/null", "ok")
		if r.code != 1 || r.stdout != "count: Inappropriate ioctl for device\n" {
			t.Fatalf("exit %d out %q", r.code, r.stdout)
		}
	})
	if _, err := os.Lstat(dev); err == nil {
		t.Error("dxgsim left its device node behind")
	}
}

// --bind-host shows the fixture at the real paths inside a private mount
// namespace and leaves the machine as it was.
func TestBindHost(t *testing.T) {
	tl := build(t)
	for _, p := range []string{"/usr/lib/wsl", "/dev/dxg"} {
		if _, err := os.Lstat(p); err == nil {
			t.Skipf("%s exists on this machine: this is a real WSL host", p)
		}
	}
	p, _ := simhost.Lookup("nvidia-laptop")
	root := filepath.Join(t.TempDir(), "host")
	cache, _ := fixture.DefaultCacheDir()
	if err := fixture.Build(root, p, fixture.Options{CacheDir: cache}); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile("/proc/1/mountinfo")
	tmpBefore, _ := filepath.Glob(filepath.Join(os.TempDir(), "dxgsim-ns-*"))
	cfg := filepath.Join(t.TempDir(), "c.toml")
	os.WriteFile(cfg, []byte("log_file = \"\"\n"), 0o644)
	r := tl.run(t, []string{"--profile", "nvidia-laptop", "--bind-host", root}, "sh", "-c",
		`test -c /dev/dxg && test -e /usr/lib/wsl/lib/libdxcore.so && ls /dev/pts >/dev/null && ! touch /usr/lib/wsl/lib/x 2>/dev/null && "$0" --config "$1" info --json`, tl.hook, cfg)
	if r.code != 0 || !strings.Contains(r.stdout, `"folder": "nvltwi.inf_amd64_7b2a5c1c4e6f8d90"`) {
		t.Fatalf("exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	after, _ := os.ReadFile("/proc/1/mountinfo")
	if !bytes.Equal(before, after) {
		t.Error("the host's mount table changed")
	}
	for _, p := range []string{"/usr/lib/wsl", "/dev/dxg"} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s appeared on the host", p)
		}
	}
	if tmpAfter, _ := filepath.Glob(filepath.Join(os.TempDir(), "dxgsim-ns-*")); len(tmpAfter) != len(tmpBefore) {
		t.Errorf("scratch dirs left behind: %v", tmpAfter)
	}
}
