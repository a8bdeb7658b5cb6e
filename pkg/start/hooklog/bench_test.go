package hooklog

import (
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/sirupsen/logrus"
)

// The entries of one prestart hook at log_level info on the simulated
// NVIDIA laptop (taken from an e2e run's log): the info and warning lines
// it writes and the debug lines it skips.
const (
	benchBundle = "/run/containerd/io.containerd.runtime.v2.task/moby/5b0e2f6c3a1d4e7f8a9b0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f"
	benchPlan   = "cgroup c 10:229: allow in the container's device cgroup; bind /usr/lib/wsl/lib -> /usr/lib/wsl/lib (ro,nosuid,nodev); bind /usr/lib/wsl/drivers/iigd_dch.inf_amd64_ba2ab4a3e0e0b2ea -> /usr/lib/wsl/drivers/iigd_dch.inf_amd64_ba2ab4a3e0e0b2ea (ro,nosuid,nodev); bind /usr/lib/wsl/drivers/nvltwi.inf_amd64_7b2a5c1c4e6f8d90 -> /usr/lib/wsl/drivers/nvltwi.inf_amd64_7b2a5c1c4e6f8d90 (ro,nosuid,nodev); file /etc/ld.so.conf.d/wsl-gpu-hook.conf (17 bytes); ldcache /etc/ld.so.cache += [libnvwgf2umx.so libnvoptix.so.1 libnvidia-opticalflow.so.1 libnvidia-ml.so.1 libnvidia-encode.so.1 libnvdxdlkernels.so libnvcuvid.so.1 libd3d12core.so libd3d12.so libdxcore.so libdirectml.so libcudadebugger.so.1 libcuda.so.1]; symlink /usr/bin/nvidia-smi -> /usr/lib/wsl/lib/nvidia-smi (if absent)"
)

// stringer stands for the hook's plan and steps, which log through their
// String methods.
type stringer struct{ s string }

func (s stringer) String() string { return s.s }

// logger is what the hook's path calls, in both implementations.
type logger interface {
	Debugf(string, ...any)
	Infof(string, ...any)
	Warnf(string, ...any)
}

func logStart(log logger, enabled func() bool) {
	log.Debugf("host probe answered from the cache in %s", "/run/wsl-gpu-hook")
	log.Infof("request %s selects %d of %d adapters", "env WSL_GPU_DEVICES", 2, 2)
	log.Infof("plan: %s", stringer{benchPlan})
	log.Warnf("skip %s: the image has no glibc loader (%s), so the libraries are not registered with the loader: programs in it need LD_LIBRARY_PATH=%s", "/etc/ld.so.cache", "/lib64/ld-linux-x86-64.so.2", "/usr/lib/wsl/lib")
	for range 7 {
		if enabled() {
			log.Debugf("apply %s", stringer{"bind /usr/lib/wsl/lib -> /usr/lib/wsl/lib (ro,nosuid,nodev)"})
		}
	}
	log.Infof("GPU ready in %s", benchBundle+"/rootfs")
}

// BenchmarkStartLog is one hook start's logging at info, side by side: the
// logger made with the stage, bundle and pid fields, then the plan's
// entries, written to io.Discard (the write(2) is the same for both).
func BenchmarkStartLog(b *testing.B) {
	pid := 4242
	b.Run("logrus", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			l := logrus.New()
			l.SetOutput(io.Discard)
			l.SetFormatter(&logrus.TextFormatter{DisableColors: true, FullTimestamp: true})
			if lvl, err := logrus.ParseLevel("info"); err == nil {
				l.SetLevel(lvl)
			}
			log := l.WithField("stage", "prestart").WithFields(logrus.Fields{"bundle": benchBundle, "pid": pid})
			logStart(log, func() bool { return true }) // Apply logged every step through Debugf
		}
	})
	b.Run("hooklog", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			level, _ := ParseLevel("info")
			log := New(io.Discard, level).With("stage", "prestart").With("bundle", benchBundle).With("pid", strconv.Itoa(pid))
			logStart(log, func() bool { return log.Enabled(Debug) })
		}
	})
}

// BenchmarkOpen is a start's opening of its log, an existing file, and
// its close: the vetting's system calls (the directory opened first, both
// fstat'ed) against the one open(2) they replaced.
func BenchmarkOpen(b *testing.B) {
	path := filepath.Join(b.TempDir(), "hook.log")
	if err := os.WriteFile(path, nil, 0o640); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		l, err := Open(path, Info)
		if err != nil {
			b.Fatal(err)
		}
		l.Close()
	}
}
