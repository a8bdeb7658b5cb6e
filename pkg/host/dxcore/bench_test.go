package dxcore

// BenchmarkEnumerateSim measures what an enumeration costs in /dev/dxg
// round trips, on the simulated NVIDIA laptop host (two adapters). It needs
// root: when the test binary is not yet under dxgsim, TestMain builds
// dxgsim and re-runs the binary under it, so every ioctl reaches the
// simulator as the hook's would. Unprivileged runs skip it.

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/testbin"
)

const (
	benchProfile = "nvidia-laptop"
	benchEnvDev  = "DXCORE_BENCH_DEV" // the node, set in the re-run under dxgsim
)

func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" && os.Getenv(benchEnvDev) == "" && os.Geteuid() == 0 {
		os.Exit(benchUnderSim())
	}
	os.Exit(m.Run())
}

// benchUnderSim re-runs this test binary under dxgsim with the same
// arguments and returns its exit status.
func benchUnderSim() int {
	dir, err := os.MkdirTemp("", "dxcore-bench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	sim, err := testbin.Dxgsim(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench setup: %v\n", err)
		return 1
	}
	dev := filepath.Join(dir, "dxg")
	args := append([]string{"--profile", benchProfile, "--dev", dev, "--"}, os.Args...)
	cmd := exec.Command(sim, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), benchEnvDev+"="+dev)
	if err := cmd.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return 1
	}
	return 0
}

// countingIoctls counts the ioctls an enumeration sends.
type countingIoctls struct {
	d adapterIoctls
	n *int
}

func (c countingIoctls) enumAdapters3(filter uint64, infos []byte) (uint32, error) {
	*c.n++
	return c.d.enumAdapters3(filter, infos)
}

func (c countingIoctls) enumAdapters2(infos []byte) (uint32, error) {
	*c.n++
	return c.d.enumAdapters2(infos)
}

func (c countingIoctls) queryAdapterInfo(handle, typ uint32, data []byte) error {
	*c.n++
	return c.d.queryAdapterInfo(handle, typ, data)
}

func (c countingIoctls) closeAdapter(handle uint32) error {
	*c.n++
	return c.d.closeAdapter(handle)
}

// previousSequence is the enumeration this package sent before the round
// trips were cut, kept as the benchmark's baseline: an ENUMADAPTERS3 count
// query before the fill, the QUERYREGISTRY size question before the real
// one, and a CLOSEADAPTER per handle.
func previousSequence(d adapterIoctls) error {
	if _, err := d.enumAdapters3(enumFilterComputeOnly, nil); err != nil {
		return err
	}
	buf := make([]byte, adaptersMax*sizeofAdapterInfo)
	n, err := d.enumAdapters3(enumFilterComputeOnly, buf)
	if err != nil {
		return err
	}
	infos := decodeAdapterInfos(buf, n)
	defer closeAll(d, infos)
	for _, info := range infos {
		if err := d.queryAdapterInfo(info.handle, qaiPhysicalAdapterDevIDs, newDeviceIDsRequest()); err != nil {
			return err
		}
		req := newRegistryRequest(0)
		if err := d.queryAdapterInfo(info.handle, qaiQueryRegistry, req); err != nil {
			return err
		}
		_, need, err := decodeRegistry(req)
		if err != nil || need == 0 {
			return fmt.Errorf("size question: need %d, %v", need, err)
		}
		req = newRegistryRequest(need)
		if err := d.queryAdapterInfo(info.handle, qaiQueryRegistry, req); err != nil {
			return err
		}
		if _, need, err := decodeRegistry(req); err != nil || need != 0 {
			return fmt.Errorf("path: need %d, %v", need, err)
		}
	}
	return nil
}

// BenchmarkEnumerateSim runs one container start's enumeration (no
// Details) the way EnumerateWith does, fd open and close included: the
// previous sequence, today's default, and today's with the handles left to
// the fd (the hook). ioctls/op counts the /dev/dxg calls.
func BenchmarkEnumerateSim(b *testing.B) {
	dev := os.Getenv(benchEnvDev)
	if dev == "" {
		b.Skip("needs root: it re-runs under dxgsim")
	}
	cases := []struct {
		name string
		run  func(adapterIoctls) error
	}{
		{"previous", previousSequence},
		{"closing", func(d adapterIoctls) error { _, err := enumerateWith(d, Options{}); return err }},
		{"fd-close", func(d adapterIoctls) error {
			_, err := enumerateWith(d, Options{CloseHandlesWithFD: true})
			return err
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			ioctls := 0
			for b.Loop() {
				fd, err := unix.Open(dev, unix.O_RDONLY|unix.O_CLOEXEC, 0)
				if err != nil {
					b.Fatal(err)
				}
				err = c.run(countingIoctls{device{fd: fd}, &ioctls})
				unix.Close(fd)
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(ioctls)/float64(b.N), "ioctls/op")
		})
	}
}
