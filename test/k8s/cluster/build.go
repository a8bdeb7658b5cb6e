package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// Binaries are the programs a cluster runs.
type Binaries struct {
	Kube       string // bin dir of hack/kube/build.sh: kube-apiserver, ..., kubectl, etcd, helm
	CNI        string // bin dir: bridge, host-local, loopback, portmap
	Prometheus string // bin dir: prometheus (hack/prometheus)
	Containerd string // bin dir: containerd, containerd-shim-runc-v2, ctr
	Dxgsim     string
	GPUWorker  string // test/gpuworker: a process the simulated host gives modelled memory
	Fixture    string // wslfixture
	OCIImage   string // hack/ociimage
	Pause      string
	Root       string // the repository
}

func (b Binaries) path(name string) string { return filepath.Join(b.Kube, name) }

// Kubectl is the kubectl binary; Helm helm's.
func (b Binaries) Kubectl() string { return b.path("kubectl") }
func (b Binaries) Helm() string    { return b.path("helm") }

// RepoRoot finds the repository from the working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.HasPrefix(string(data), "module github.com/wsl-gpu-hook/wsl-gpu-hook\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the wsl-gpu-hook repository")
		}
		dir = parent
	}
}

// Build returns the cluster's binaries: the cached ones from hack/kube and
// hack/engines (built on first use: the Kubernetes build is long), and the
// repository's test tools built into bin.
func Build(bin string) (Binaries, error) {
	root, err := RepoRoot()
	if err != nil {
		return Binaries{}, err
	}
	b := Binaries{Root: root}
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return b, err
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	do := func(f func() error) {
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
	do(func() error {
		out, err := script(root, "hack/kube/build.sh", "kube", "cni", "prometheus")
		if err == nil {
			if l := strings.Fields(out); len(l) == 3 {
				b.Kube, b.CNI, b.Prometheus = l[0], l[1], l[2]
			} else {
				err = fmt.Errorf("hack/kube/build.sh printed %q", out)
			}
		}
		return err
	})
	do(func() (err error) {
		b.Containerd, err = script(root, "hack/engines/build.sh", "containerd")
		return err
	})
	for _, t := range []struct {
		dst *string
		pkg string
	}{{&b.Dxgsim, "./test/dxgsim"}, {&b.GPUWorker, "./test/gpuworker"}, {&b.Fixture, "./test/fixture/cmd/wslfixture"}, {&b.OCIImage, "./hack/ociimage"}} {
		*t.dst = filepath.Join(bin, filepath.Base(t.pkg))
		do(func() error { return GoBuild(root, *t.dst, t.pkg) })
	}
	b.Pause = filepath.Join(bin, "pause")
	do(func() error { return GoBuild(filepath.Join(root, "test/k8s"), b.Pause, "./cluster/pause") })
	wg.Wait()
	return b, errors.Join(errs...)
}

// GoBuild builds pkg of the module in dir into out, static.
func GoBuild(dir, out, pkg string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return nil
}

func script(root, path string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(root, path), args...)
	cmd.Dir = root
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s: %v\n%s", path, err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

// buildImages writes the pause and test image archives every node imports.
func (c *Cluster) buildImages() error {
	test, err := WriteTestImage(c.Bins, filepath.Join(c.Dir, "images"))
	if err != nil {
		return err
	}
	pause := filepath.Join(c.Dir, "images", "pause.tar")
	if _, err := run(c.Bins.OCIImage, "--out", pause, "--tag", PauseImage, "--add", c.Bins.Pause+":/pause:0755", "--entrypoint", "/pause"); err != nil {
		return err
	}
	c.images = append([]string{pause, test}, c.opt.Images...)
	return nil
}

// WriteTestImage writes TestImage's archive into dir and returns its path.
// Its root stays in dir/rootfs, for WriteStandIn.
func WriteTestImage(b Binaries, dir string) (string, error) {
	if err := testRootfs(filepath.Join(dir, "rootfs"), filepath.Join(b.Root, "hack/cudaprobe.c"), b.GPUWorker); err != nil {
		return "", err
	}
	test := filepath.Join(dir, "test.tar")
	_, err := run(b.OCIImage, "--out", test, "--tag", TestImage, "--dir", filepath.Join(dir, "rootfs"),
		"--entrypoint", "/bin/sh", "--env", "PATH=/usr/local/bin:/bin")
	return test, err
}

// testRootfs lays out a minimal glibc image: busybox, the host's glibc (the
// fixture's libraries are built against it), cudaprobe, which dlopens
// libcuda.so.1 with no LD_LIBRARY_PATH and calls cuInit, and gpu-worker,
// the process the simulated host's workload model gives GPU memory.
func testRootfs(root, cudaprobe, worker string) error {
	for _, d := range []string{"bin", "etc", "dev", "proc", "sys", "tmp", "usr/local/bin", "lib64", "lib/x86_64-linux-gnu"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	bb, err := exec.LookPath("busybox")
	if err != nil {
		return err
	}
	if _, err := run("cp", bb, filepath.Join(root, "bin/busybox")); err != nil {
		return err
	}
	list, err := exec.Command(bb, "--list").Output()
	if err != nil {
		return err
	}
	for _, applet := range strings.Fields(string(list)) {
		os.Symlink("busybox", filepath.Join(root, "bin", applet))
	}
	for _, l := range []string{"ld-linux-x86-64.so.2", "libc.so.6", "libdl.so.2", "libm.so.6", "libpthread.so.0"} {
		if _, err := run("cp", "-L", "/lib/x86_64-linux-gnu/"+l, filepath.Join(root, "lib/x86_64-linux-gnu", l)); err != nil {
			return err
		}
	}
	if err := os.Symlink("/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", filepath.Join(root, "lib64/ld-linux-x86-64.so.2")); err != nil {
		return err
	}
	os.WriteFile(filepath.Join(root, "etc/passwd"), []byte("root:x:0:0:root:/root:/bin/sh\n"), 0o644)
	if _, err := run("cp", worker, filepath.Join(root, "usr/local/bin/gpu-worker")); err != nil {
		return err
	}
	_, err = run("gcc", "-O2", "-o", filepath.Join(root, "usr/local/bin/cudaprobe"), cudaprobe, "-ldl")
	return err
}
