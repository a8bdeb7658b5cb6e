// Package engines runs the real container engines users start GPU
// containers with (dockerd, podman) on the simulated WSL host: each engine
// runs under dxgsim, so everything it starts (containerd, shims, runc, the
// hook) talks to the simulated /dev/dxg, and each test checks from inside
// the container what a user would: /dev/dxg opens and libcuda.so.1 loads.
package engines

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/fixture"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/simhost"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/testbin"
)

const profile = "nvidia-laptop"

// env is what every engine test shares, built once.
type env struct {
	dir     string // scratch
	hook    string // static hook binary
	sim     string
	bin     string // PATH dir with the hook's other names
	config  string // hook config pointing at the simulated host
	dev     string // simulated device node
	rootfs  string // image tree: busybox + glibc + cudaprobe
	imgTar  string
	nvidia  string // the NVIDIA driver folder name
	intel   string
	hostDir string
}

// TestMain removes what the tests built once for all of them (the
// shared env, the Docker Desktop image): a run leaves nothing in /tmp.
func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		os.RemoveAll(shared.dir)
	}
	if desktopOnce.dir != "" {
		os.RemoveAll(desktopOnce.dir)
	}
	os.Exit(code)
}

var (
	setupOnce sync.Once
	shared    *env
	setupErr  error
)

func setup(t *testing.T) *env {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: runs container engines")
	}
	setupOnce.Do(func() { shared, setupErr = build() })
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	return shared
}

func build() (*env, error) {
	dir, err := os.MkdirTemp("", "wsl-gpu-engines-")
	if err != nil {
		return nil, err
	}
	e := &env{dir: dir, bin: filepath.Join(dir, "bin")}
	if err := os.MkdirAll(e.bin, 0o755); err != nil {
		return nil, err
	}
	if e.hook, err = testbin.Hook(e.bin); err != nil {
		return nil, err
	}
	if e.sim, err = testbin.Dxgsim(dir); err != nil {
		return nil, err
	}
	for _, name := range []string{"nvidia-container-runtime-hook", "wsl-gpu-runtime"} {
		if err := os.Symlink("wsl-gpu-hook", filepath.Join(e.bin, name)); err != nil {
			return nil, err
		}
	}
	p, err := simhost.Lookup(profile)
	if err != nil {
		return nil, err
	}
	for _, a := range p.Adapters {
		switch a.Kind {
		case simhost.FolderNVIDIA:
			e.nvidia = a.Folder
		case simhost.FolderIntel:
			e.intel = a.Folder
		}
	}
	e.hostDir = filepath.Join(dir, "host")
	cache, _ := fixture.DefaultCacheDir()
	if err := fixture.Build(e.hostDir, p, fixture.Options{CacheDir: cache}); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "dev"), 0o755); err != nil {
		return nil, err
	}
	e.dev = filepath.Join(dir, "dev", "dxg")
	e.config = filepath.Join(dir, "config.toml")
	cfg := fixture.Config{Dxg: e.dev, Host: e.hostDir, LogFile: filepath.Join(dir, "hook.log"), LogLevel: "debug"}
	if err := cfg.Write(e.config); err != nil {
		return nil, err
	}
	e.rootfs = filepath.Join(dir, "rootfs")
	if err := image(e.rootfs); err != nil {
		return nil, err
	}
	e.imgTar = filepath.Join(dir, "image.tar")
	if out, err := exec.Command("tar", "-C", e.rootfs, "-cf", e.imgTar, ".").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("tar: %v: %s", err, out)
	}
	return e, nil
}

// image lays out a minimal glibc image: busybox, the host's glibc (Debian
// 12, the same as the fixture's libraries were built against) and
// cudaprobe, which dlopens libcuda.so.1 with no LD_LIBRARY_PATH.
func image(root string) error {
	for _, d := range []string{"bin", "etc", "dev", "proc", "sys", "tmp", "usr/local/bin", "lib64", "lib/x86_64-linux-gnu"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	bb, err := exec.LookPath("busybox")
	if err != nil {
		return fmt.Errorf("busybox-static is not installed: %w", err)
	}
	if out, err := exec.Command("cp", bb, filepath.Join(root, "bin/busybox")).CombinedOutput(); err != nil {
		return fmt.Errorf("cp busybox: %v %s", err, out)
	}
	list, err := exec.Command(bb, "--list").Output()
	if err != nil {
		return err
	}
	for _, applet := range strings.Fields(string(list)) {
		os.Symlink("busybox", filepath.Join(root, "bin", applet))
	}
	for _, l := range []string{"ld-linux-x86-64.so.2", "libc.so.6", "libdl.so.2", "libm.so.6", "libpthread.so.0"} {
		if out, err := exec.Command("cp", "-L", "/lib/x86_64-linux-gnu/"+l, filepath.Join(root, "lib/x86_64-linux-gnu", l)).CombinedOutput(); err != nil {
			return fmt.Errorf("cp %s: %v %s", l, err, out)
		}
	}
	if err := os.Symlink("/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", filepath.Join(root, "lib64/ld-linux-x86-64.so.2")); err != nil {
		return err
	}
	os.WriteFile(filepath.Join(root, "etc/passwd"), []byte("root:x:0:0:root:/root:/bin/sh\n"), 0o644)
	out, err := exec.Command("gcc", "-O2", "-o", filepath.Join(root, "usr/local/bin/cudaprobe"), "../../hack/cudaprobe.c", "-ldl").CombinedOutput()
	if err != nil {
		return fmt.Errorf("gcc cudaprobe: %v\n%s", err, out)
	}
	return nil
}

// inside is the script every GPU container runs: what a user checks.
const inside = `: <> /dev/dxg && echo dxg-open
ls /usr/lib/wsl/drivers | sed 's/^/folder /'
cudaprobe
touch /usr/lib/wsl/lib/x 2>/dev/null && echo LIB-WRITABLE || echo lib-readonly
`

// checkGPU asserts the output of inside: CUDA must work exactly when the
// NVIDIA driver folder is among the folders.
func checkGPU(t *testing.T, out string, cuda bool, folders ...string) {
	t.Helper()
	if got := strings.Contains(out, "cudaprobe: cuInit(0) = 0"); got != cuda {
		t.Errorf("cuInit succeeded = %v, want %v:\n%s", got, cuda, out)
	}
	for _, want := range []string{"dxg-open", "cudaprobe: loaded /usr/lib/wsl/lib/libcuda.so.1", "lib-readonly"} {
		if !strings.Contains(out, want) {
			t.Errorf("container output lacks %q:\n%s", want, out)
		}
	}
	var got []string
	for _, l := range strings.Split(out, "\n") {
		if f, ok := strings.CutPrefix(l, "folder "); ok {
			got = append(got, f)
		}
	}
	if strings.Join(got, ",") != strings.Join(folders, ",") {
		t.Errorf("driver folders %v, want %v", got, folders)
	}
}

// daemon is an engine daemon running under dxgsim.
type daemon struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer
	report string
}

// startDaemon runs args under dxgsim in a private mount namespace with a
// fresh tmpfs on /run: the daemon cannot find (and use) a system containerd
// that is not under the simulator, and leaves no state in the host's /run.
func startDaemon(t *testing.T, e *env, extraEnv []string, args ...string) *daemon {
	t.Helper()
	d := &daemon{report: filepath.Join(t.TempDir(), "dxgsim.json")}
	simArgs := append([]string{"--profile", profile, "--dev", e.dev, "--report", d.report, "--",
		"unshare", "--mount", "--propagation", "private", "sh", "-c", `mount -t tmpfs tmpfs /run && exec "$@"`, "sh"}, args...)
	d.cmd = exec.Command(e.sim, simArgs...)
	d.cmd.Env = append(append(os.Environ(), "PATH="+e.bin+":"+os.Getenv("PATH"), "WSL_GPU_HOOK_CONFIG="+e.config), extraEnv...)
	d.cmd.Stdout, d.cmd.Stderr = &d.stderr, &d.stderr
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return d
}

// stop ends the daemon and fails the test on protocol misuse.
func (d *daemon) stop(t *testing.T) {
	t.Helper()
	d.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- d.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	if strings.Contains(d.stderr.String(), "dxgsim: misuse") {
		t.Errorf("protocol misuse:\n%s", grepLines(d.stderr.String(), "dxgsim: misuse"))
	}
	var r struct {
		Open int `json:"handlesOpen"`
	}
	if data, err := os.ReadFile(d.report); err == nil && json.Unmarshal(data, &r) == nil && r.Open != 0 {
		t.Errorf("%d adapter handles left open", r.Open)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func run(t *testing.T, env []string, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// hostWSLMounts lists the host's mounts that name the WSL paths: a hook
// mount that leaked out of a container would show here.
func hostWSLMounts(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("/proc/1/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	return grepLines(string(data), "/usr/lib/wsl")
}

// scratchDir is t.TempDir for podman's storage: conmon starts `podman
// container cleanup` after a container exits, and that may still write
// into the storage after `podman run` returned, which makes a single
// RemoveAll fail with "directory not empty". It retries for a while.
func scratchDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "wsl-gpu-engines-"+strings.ReplaceAll(t.Name(), "/", "_")+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		var err error
		for i := 0; i < 50; i++ {
			if err = os.RemoveAll(dir); err == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Errorf("remove %s: %v", dir, err)
	})
	return dir
}
