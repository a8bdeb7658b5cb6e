package k8s

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Versions under test. The kubelet is built from this module's
// k8s.io/kubernetes requirement; containerd by hack/engines/build.sh.
const (
	kubeletVersion = "v1.34.4"
	profile        = "nvidia-laptop"
)

func cacheDir() string {
	if d := os.Getenv("E2E_CACHE"); d != "" {
		return d
	}
	return "/var/cache/wsl-gpu-hook-e2e"
}

// env is one simulated WSL node: binaries, host tree, config.
type env struct {
	dir        string // scratch, short: unix socket paths must fit 108 bytes
	bin        string // the hook (and its other names), the plugin, dxgsim
	kubelet    string
	containerd string // bin dir: containerd, containerd-shim-runc-v2, ctr
	hostDir    string // simulated /usr/lib/wsl lives under it
	libDir     string
	driversDir string
	nvidia     string // the NVIDIA driver folder's name
	dev        string // the simulated /dev/dxg containerd's dxgsim makes
	config     string // the hook's and the plugin's config
	cdiDir     string
	rootfs     string // image tree: busybox, glibc, cudaprobe
}

// goBuild builds a package of the main module (two levels up) into out.
func goBuild(out, pkg string, extraEnv ...string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, pkg)
	cmd.Dir = "../.."
	cmd.Env = append(append(os.Environ(), "CGO_ENABLED=0"), extraEnv...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return nil
}

// kubeletBinary returns the kubelet built from k8s.io/kubernetes at
// kubeletVersion, building it once into the shared cache (a cold build
// takes a long while on a small machine; later runs reuse it). $KUBELET
// names a kubelet binary to use instead.
func kubeletBinary(t *testing.T) string {
	if bin := os.Getenv("KUBELET"); bin != "" {
		return bin // a kubelet built elsewhere
	}
	dest := filepath.Join(cacheDir(), "engines", "kubelet-"+kubeletVersion)
	bin := filepath.Join(dest, "bin", "kubelet")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if err := os.MkdirAll(filepath.Join(dest, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(dest+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	start := time.Now()
	tmp := bin + ".tmp"
	ld := "-s -w -X k8s.io/component-base/version.gitVersion=" + kubeletVersion +
		" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=34"
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", ld, "-o", tmp, "k8s.io/kubernetes/cmd/kubelet")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the kubelet: %v\n%s", err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		t.Fatal(err)
	}
	t.Logf("built kubelet %s in %s", kubeletVersion, time.Since(start).Round(time.Second))
	return bin
}

// containerdBinaries returns containerd 2.4's bin dir from the engines
// build script shared with test/engines.
func containerdBinaries(t *testing.T) string {
	script, err := filepath.Abs("../../hack/engines/build.sh")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(script); err != nil {
		t.Fatalf("containerd 2.4 comes from %s, which is missing: %v", script, err)
	}
	cmd := exec.Command(script, "containerd")
	cmd.Dir = "../.."
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/engines/build.sh containerd: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func setup(t *testing.T) *env {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: runs a kubelet and containerd")
	}
	for _, tool := range []string{"runc", "gcc", "busybox", "unshare"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	dir, err := os.MkdirTemp("/tmp", "wgk-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	e := &env{dir: dir, bin: filepath.Join(dir, "bin"), hostDir: filepath.Join(dir, "host"), cdiDir: filepath.Join(dir, "cdi")}
	for _, d := range []string{e.bin, e.cdiDir, filepath.Join(dir, "dev")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	build := func(f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	build(func() error { return goBuild(filepath.Join(e.bin, "wsl-gpu-hook"), "./cmd/wsl-gpu-hook") })
	// cdi generate is wsl-gpu-ctl's: the hook hands it to the one beside it.
	build(func() error { return goBuild(filepath.Join(e.bin, "wsl-gpu-ctl"), "./cmd/wsl-gpu-ctl") })
	build(func() error {
		return goBuild(filepath.Join(e.bin, "wsl-gpu-device-plugin"), "./cmd/wsl-gpu-device-plugin")
	})
	build(func() error { return goBuild(filepath.Join(e.bin, "dxgsim"), "./test/dxgsim") })
	build(func() error {
		if err := goBuild(filepath.Join(dir, "wslfixture"), "./test/fixture/cmd/wslfixture"); err != nil {
			return err
		}
		out, err := exec.Command(filepath.Join(dir, "wslfixture"), "--profile", profile, "--out", e.hostDir,
			"--cache", filepath.Join(cacheDir(), "fixture")).CombinedOutput()
		if err != nil {
			return fmt.Errorf("wslfixture: %v\n%s", err, out)
		}
		return nil
	})
	build(func() error {
		e.rootfs = filepath.Join(dir, "rootfs")
		return image(e.rootfs)
	})
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if err := os.Symlink("wsl-gpu-hook", filepath.Join(e.bin, "wsl-gpu-runtime")); err != nil {
		t.Fatal(err)
	}
	e.kubelet = kubeletBinary(t)
	e.containerd = containerdBinaries(t)

	e.libDir = filepath.Join(e.hostDir, "usr/lib/wsl/lib")
	e.driversDir = filepath.Join(e.hostDir, "usr/lib/wsl/drivers")
	ents, err := os.ReadDir(e.driversDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range ents {
		if strings.HasPrefix(ent.Name(), "nvltwi.inf") {
			e.nvidia = ent.Name()
		}
	}
	if e.nvidia == "" {
		t.Fatalf("no NVIDIA folder in %s", e.driversDir)
	}
	e.dev = filepath.Join(dir, "dev", "dxg")
	e.config = filepath.Join(dir, "config.toml")
	cfg := fmt.Sprintf("dxg_device = %q\nlib_dir = %q\ndrivers_dir = %q\nlog_file = %q\nlog_level = \"debug\"\n",
		e.dev, e.libDir, e.driversDir, filepath.Join(dir, "hook.log"))
	if err := os.WriteFile(e.config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return e
}

// image lays out a minimal glibc image: busybox, the host's glibc (the
// fixture's libraries are built against it) and cudaprobe, which dlopens
// libcuda.so.1 with no LD_LIBRARY_PATH and calls cuInit.
func image(root string) error {
	for _, d := range []string{"bin", "etc", "dev", "proc", "sys", "tmp", "usr/local/bin", "lib64", "lib/x86_64-linux-gnu"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	bb, err := exec.LookPath("busybox")
	if err != nil {
		return err
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

// dockerArchive writes a `docker save` archive of rootfs tagged tag, what
// `ctr images import` reads, so the CRI plugin has images with no registry.
func dockerArchive(rootfs, tag string, out string) error {
	var layer bytes.Buffer
	tarCmd := exec.Command("tar", "-C", rootfs, "-cf", "-", ".")
	tarCmd.Stdout = &layer
	if err := tarCmd.Run(); err != nil {
		return fmt.Errorf("tar rootfs: %w", err)
	}
	h := sha256.Sum256(layer.Bytes())
	config, _ := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux",
		"config": map[string]any{"Entrypoint": []string{"/bin/sleep", "3600"}, "Env": []string{"PATH=/usr/local/bin:/bin"}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(h[:])}},
	})
	cs := sha256.Sum256(config)
	configName := hex.EncodeToString(cs[:]) + ".json"
	manifest, _ := json.Marshal([]map[string]any{{"Config": configName, "RepoTags": []string{tag}, "Layers": []string{"layer/layer.tar"}}})
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	for _, file := range []struct {
		name string
		data []byte
	}{{"manifest.json", manifest}, {configName, config}, {"layer/layer.tar", layer.Bytes()}} {
		if err := tw.WriteHeader(&tar.Header{Name: file.name, Mode: 0o644, Size: int64(len(file.data)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(file.data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// freePort asks the kernel for an unused TCP port on localhost.
func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// proc is a daemon the test started, in its own process group.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  *syncBuffer
	done chan struct{}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func start(t *testing.T, name string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, log: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(args[0], args[1:]...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	return p
}

func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM to the process group, then SIGKILL after a grace time.
func (p *proc) stop() {
	if !p.running() {
		return
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// waitFor polls cond until it holds; on timeout it fails with what the
// daemons said.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool, logs ...*proc) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		for _, p := range logs {
			if !p.running() {
				t.Fatalf("waiting for %s: %s exited:\n%s", what, p.name, tail(p.log.String(), 40))
			}
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			for _, p := range logs {
				if d := os.Getenv("K8S_TEST_LOGDIR"); d != "" {
					os.WriteFile(filepath.Join(d, strings.ReplaceAll(p.name, " ", "-")+".log"), []byte(p.log.String()), 0o644)
				}
				fmt.Fprintf(&b, "--- %s:\n%s\n", p.name, tail(p.log.String(), 40))
			}
			t.Fatalf("timed out after %s waiting for %s\n%s", d, what, b.String())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func itoa(i int) string { return strconv.Itoa(i) }
