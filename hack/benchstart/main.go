// Command benchstart measures what the hook adds to a container start: it
// runs `runc run` of a container running /bin/true three ways, alternately,
// on the simulated NVIDIA laptop host (dxgsim + test/fixture), each on a
// fresh overlay root file system on disk, and prints medians and ratios.
//
//	plain   runc alone
//	hook    runc with wsl-gpu-hook as a prestart hook, WSL_GPU_DEVICES=all
//	true    runc running /bin/true as the prestart hook: what any hook
//	        costs a start (runc's fork, exec and wait)
//	emptygo runc running an empty static Go program as the prestart hook
//	        (hack/benchstart/emptyhook): what any Go hook costs, the floor
//	        the hook's own work adds to
//	nvcdi   what NVIDIA's WSL CDI spec makes runc do, built from the same
//	        fixture: /dev/dxg with its rule, every file of the NVIDIA driver
//	        folder and libdxcore.so bound read-only one by one, and a
//	        createContainer hook that runs the host's ldconfig -r on the
//	        root file system as nvidia-cdi-hook update-ldcache does
//
// Run it as root through `make bench-start` (hack/bench-start.sh). It
// re-runs itself under dxgsim so that the hook's ioctls reach the
// simulator; the filter costs runc nothing, as it only stops dxg ioctls.
// It is a test tool: it is never shipped.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/fixture"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/simhost"
)

const (
	profileName = "nvidia-laptop"
	// envWork names the prepared work dir in the re-run under dxgsim.
	envWork = "WSL_GPU_BENCH_WORK"
	// cgroupParent holds every bench container's cgroup.
	cgroupParent = "wsl-gpu-hook-bench"
	// debianTarball is the image test/e2e caches (images_test.go).
	debianTarball = "debian-bookworm-minbase-v1.tar"
)

type options struct {
	runs    int
	hook    string // the hook binary to measure
	compare string // another hook binary, measured alongside: "" for none
	empty   string // the empty Go hook (emptyhook): "" leaves the floors out
	dxgsim  string
	cache   string // test/e2e's cache: the Debian image and fixture objects
	workDir string // parent of the work dir: on disk, not tmpfs
	keep    bool
}

func main() {
	var o options
	flag.IntVar(&o.runs, "runs", 21, "runs of each variant")
	flag.StringVar(&o.hook, "hook", "", "wsl-gpu-hook binary to measure (required)")
	flag.StringVar(&o.dxgsim, "dxgsim", "", "dxgsim binary (required)")
	flag.StringVar(&o.empty, "empty", "", "the empty Go hook (hack/benchstart/emptyhook): adds the floor variants true and emptygo")
	flag.StringVar(&o.compare, "compare", "", "a second hook binary (an older build, say), run as a fourth variant \"compare\"")
	flag.StringVar(&o.cache, "cache", "/var/cache/wsl-gpu-hook-e2e", "test/e2e's cache: the Debian minbase image and the fixture's compiled objects")
	flag.StringVar(&o.workDir, "workdir", "/var/tmp", "where the work dir goes: a disk file system, as container storage is")
	flag.BoolVar(&o.keep, "keep", false, "keep the work dir")
	flag.Parse()
	var err error
	if w := os.Getenv(envWork); w != "" {
		err = measure(w, o.runs, o.compare != "", o.empty != "")
	} else {
		err = prepareAndRun(o)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench-start: %v\n", err)
		os.Exit(1)
	}
}

// prepareAndRun builds the simulated host and the image's lower layer, then
// re-runs this program under dxgsim to measure.
func prepareAndRun(o options) error {
	if os.Geteuid() != 0 {
		return errors.New("runs containers with runc: run it as root (sudo make bench-start)")
	}
	if o.hook == "" || o.dxgsim == "" {
		return errors.New("--hook and --dxgsim are required (hack/bench-start.sh passes them)")
	}
	if o.runs < 1 {
		return errors.New("--runs must be at least 1")
	}
	for _, tool := range []string{"runc", "tar", "ldconfig"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s is not installed: install it (hack/setup.sh does)", tool)
		}
	}
	image := filepath.Join(o.cache, debianTarball)
	if _, err := os.Stat(image); err != nil {
		return fmt.Errorf("no Debian image at %s: run `go test ./test/e2e/` once as root, which builds it: %w", image, err)
	}
	work, err := os.MkdirTemp(o.workDir, "wsl-gpu-bench-start-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Fprintf(os.Stderr, "bench-start: work dir %s\n", work)
	} else {
		defer os.RemoveAll(work)
	}
	if err := copyFile(o.hook, filepath.Join(work, "wsl-gpu-hook")); err != nil {
		return err
	}
	if o.compare != "" {
		if err := copyFile(o.compare, filepath.Join(work, "wsl-gpu-hook-compare")); err != nil {
			return err
		}
	}
	if o.empty != "" {
		if err := copyFile(o.empty, filepath.Join(work, "emptyhook")); err != nil {
			return err
		}
		if err := copyFile("/bin/true", filepath.Join(work, "true")); err != nil {
			return err
		}
	}
	p, err := simhost.Lookup(profileName)
	if err != nil {
		return err
	}
	if err := fixture.Build(filepath.Join(work, "host"), p, fixture.Options{CacheDir: filepath.Join(o.cache, "fixture")}); err != nil {
		return fmt.Errorf("build the fixture: %w", err)
	}
	lower := filepath.Join(work, "lower")
	if err := os.MkdirAll(lower, 0o755); err != nil {
		return err
	}
	if out, err := exec.Command("tar", "-C", lower, "-xf", image).CombinedOutput(); err != nil {
		return fmt.Errorf("extract %s: %w: %s", image, err, out)
	}
	for _, d := range []string{"dev", "runs", "state"} {
		if err := os.MkdirAll(filepath.Join(work, d), 0o755); err != nil {
			return err
		}
	}
	cfg := fmt.Sprintf("dxg_device = %q\nlib_dir = %q\ndrivers_dir = %q\nlog_file = %q\n",
		filepath.Join(work, "dev/dxg"), filepath.Join(work, "host", fixture.LibDir),
		filepath.Join(work, "host", fixture.DriversDir), filepath.Join(work, "hook.log"))
	if err := os.WriteFile(filepath.Join(work, "hook.toml"), []byte(cfg), 0o644); err != nil {
		return err
	}
	tmpl, err := exec.Command("runc", "spec", "--bundle", work).CombinedOutput()
	if err != nil {
		return fmt.Errorf("runc spec: %w: %s", err, tmpl)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	args := []string{"--profile", profileName, "--dev", filepath.Join(work, "dev/dxg"), "--", self, "--runs", strconv.Itoa(o.runs)}
	if o.compare != "" {
		args = append(args, "--compare", o.compare)
	}
	if o.empty != "" {
		args = append(args, "--empty", o.empty)
	}
	cmd := exec.Command(o.dxgsim, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), envWork+"="+work)
	defer removeCgroupParents()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("under dxgsim: %w", err)
	}
	return nil
}

// variant is one way of starting the container.
type variant struct {
	name string
	edit func(spec *specs.Spec, rootfs string)
}

func measure(work string, runs int, compare, floors bool) error {
	var base specs.Spec
	data, err := os.ReadFile(filepath.Join(work, "config.json"))
	if err == nil {
		err = json.Unmarshal(data, &base)
	}
	if err != nil {
		return fmt.Errorf("runc spec template: %w", err)
	}
	base.Process.Terminal = false
	base.Process.Args = []string{"/bin/true"}
	base.Root = &specs.Root{Path: "rootfs"}
	base.Hostname = "bench"

	var node unix.Stat_t
	if err := unix.Stat(filepath.Join(work, "dev/dxg"), &node); err != nil {
		return fmt.Errorf("the simulated node: %w", err)
	}
	nv, err := nvidiaEdits(work, node)
	if err != nil {
		return err
	}
	withHook := func(bin string) func(*specs.Spec, string) {
		return func(s *specs.Spec, _ string) {
			s.Process.Env = append(s.Process.Env, "WSL_GPU_DEVICES=all")
			s.Hooks = &specs.Hooks{Prestart: []specs.Hook{{ //nolint:staticcheck // Docker still uses prestart.
				Path: filepath.Join(work, bin),
				Args: []string{"wsl-gpu-hook", "--config", filepath.Join(work, "hook.toml"), "prestart"},
			}}}
		}
	}
	variants := []variant{
		{"plain", func(*specs.Spec, string) {}},
		{"hook", withHook("wsl-gpu-hook")},
		{"nvcdi", nv},
	}
	if compare {
		variants = append(variants, variant{"compare", withHook("wsl-gpu-hook-compare")})
	}
	if floors {
		variants = append(variants, variant{"true", withHook("true")}, variant{"emptygo", withHook("emptyhook")})
	}

	times := make(map[string][]time.Duration)
	for i := range runs {
		// Rotate the order so no variant always follows another.
		for k := range variants {
			v := variants[(i+k)%len(variants)]
			d, err := runOnce(work, &base, v, i)
			if err != nil {
				return fmt.Errorf("run %d, %s: %w", i, v.name, err)
			}
			times[v.name] = append(times[v.name], d)
		}
	}
	report(times, runs)
	return nil
}

// nvidiaEdits is the container edit NVIDIA's WSL CDI spec makes, from the
// same fixture the hook reads.
func nvidiaEdits(work string, node unix.Stat_t) (func(*specs.Spec, string), error) {
	host := filepath.Join(work, "host")
	p, err := simhost.Lookup(profileName)
	if err != nil {
		return nil, err
	}
	var folders []string
	for _, a := range p.Adapters {
		if a.VendorID == simhost.VendorNVIDIA {
			win := a.DriverStorePath
			folders = append(folders, filepath.Join(host, fixture.DriversDir, win[strings.LastIndexByte(win, '\\')+1:]))
		}
	}
	if len(folders) != 1 {
		return nil, fmt.Errorf("want one NVIDIA adapter in profile %s, found %d", profileName, len(folders))
	}
	var mounts []specs.Mount
	bind := func(hostPath string) {
		rel, _ := filepath.Rel(host, hostPath)
		mounts = append(mounts, specs.Mount{Source: hostPath, Destination: "/" + rel, Type: "bind",
			Options: []string{"ro", "nosuid", "nodev", "rbind", "rprivate"}})
	}
	err = filepath.WalkDir(folders[0], func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			bind(p)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	bind(filepath.Join(host, fixture.LibDir, "libdxcore.so"))
	folderInCtr := "/" + strings.TrimPrefix(strings.TrimPrefix(folders[0], host), "/")
	major, minor := int64(unix.Major(node.Rdev)), int64(unix.Minor(node.Rdev))
	mode := os.FileMode(0o666)
	ldconfig, err := exec.LookPath("ldconfig")
	if err != nil {
		return nil, err
	}
	fmt.Printf("nvcdi: %d file binds (%d from %s, plus libdxcore.so), /dev/dxg %d:%d, ldconfig hook\n",
		len(mounts), len(mounts)-1, filepath.Base(folders[0]), major, minor)
	return func(s *specs.Spec, rootfs string) {
		s.Mounts = append(s.Mounts, mounts...)
		s.Linux.Devices = append(s.Linux.Devices, specs.LinuxDevice{Path: "/dev/dxg", Type: "c", Major: major, Minor: minor, FileMode: &mode})
		s.Linux.Resources.Devices = append(s.Linux.Resources.Devices, specs.LinuxDeviceCgroup{Allow: true, Type: "c", Major: &major, Minor: &minor, Access: "rwm"})
		// update-ldcache writes a drop-in naming the folders and runs
		// the host's ldconfig with -r on the container's root; the
		// createContainer hook runs in the container's mount namespace
		// before pivot_root, where the root is at its host path.
		script := fmt.Sprintf("printf '%%s\\n' %s /usr/lib/wsl/lib > %s/etc/ld.so.conf.d/00-nvcr-bench.conf && exec %s -r %s",
			folderInCtr, rootfs, ldconfig, rootfs)
		s.Hooks = &specs.Hooks{CreateContainer: []specs.Hook{{Path: "/bin/sh", Args: []string{"sh", "-c", script}}}}
	}, nil
}

// runOnce starts and removes one container of variant v on a fresh overlay
// and returns how long `runc run` took.
func runOnce(work string, base *specs.Spec, v variant, i int) (time.Duration, error) {
	id := fmt.Sprintf("bench-%s-%d", v.name, i)
	dir := filepath.Join(work, "runs", id)
	bundle := filepath.Join(dir, "bundle")
	rootfs := filepath.Join(bundle, "rootfs")
	upper, wdir := filepath.Join(dir, "upper"), filepath.Join(dir, "work")
	for _, d := range []string{rootfs, upper, wdir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return 0, err
		}
	}
	defer os.RemoveAll(dir)
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", filepath.Join(work, "lower"), upper, wdir)
	if err := unix.Mount("overlay", rootfs, "overlay", 0, opts); err != nil {
		return 0, fmt.Errorf("mount overlay: %w", err)
	}
	defer unix.Unmount(rootfs, unix.MNT_DETACH)

	spec := clone(base)
	spec.Linux.CgroupsPath = "/" + cgroupParent + "/" + id
	if spec.Linux.Resources == nil {
		spec.Linux.Resources = &specs.LinuxResources{}
	}
	v.edit(spec, rootfs)
	data, err := json.Marshal(spec)
	if err != nil {
		return 0, err
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), data, 0o644); err != nil {
		return 0, err
	}
	// Settle the page cache and writeback of the setup before timing.
	syscall.Sync()
	cmd := exec.Command("runc", "--root", filepath.Join(work, "state"), "run", "--bundle", bundle, id)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(start)
	if err != nil {
		exec.Command("runc", "--root", filepath.Join(work, "state"), "delete", "-f", id).Run()
		return 0, fmt.Errorf("runc run: %w: %s", err, out)
	}
	return d, nil
}

func clone(s *specs.Spec) *specs.Spec {
	data, _ := json.Marshal(s)
	var c specs.Spec
	_ = json.Unmarshal(data, &c)
	return &c
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// paired returns each round's a-b: the variants of a round run back to
// back, so a load that drifts between rounds weighs on both alike.
func paired(a, b []time.Duration) []time.Duration {
	d := make([]time.Duration, len(a))
	for i := range a {
		d[i] = a[i] - b[i]
	}
	return d
}

func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1)+0.5)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }

func report(times map[string][]time.Duration, runs int) {
	fmt.Printf("runc run of /bin/true on an overlay root on disk, simulated %s host, %d runs each, alternating\n", profileName, runs)
	fmt.Printf("%-7s %9s %9s %9s %9s\n", "variant", "median", "p25", "p75", "min")
	for _, name := range variantNames {
		t := times[name]
		if len(t) == 0 {
			continue
		}
		fmt.Printf("%-7s %6s ms %6s ms %6s ms %6s ms\n", name, ms(median(t)), ms(quantile(t, 0.25)), ms(quantile(t, 0.75)), ms(slices.Min(t)))
	}
	plain := median(times["plain"])
	for _, name := range variantNames[1:] {
		t := times[name]
		if len(t) == 0 {
			continue
		}
		m := median(t)
		fmt.Printf("%s adds %s ms (median), ratio %s/plain %.3f; paired: %s ms (median of each round's difference)\n",
			name, ms(m-plain), name, float64(m)/float64(plain), ms(median(paired(t, times["plain"]))))
	}
	if floor := times["emptygo"]; len(floor) > 0 {
		fmt.Printf("hook over the empty Go hook (its own work and size): %s ms (median), paired: %s ms\n",
			ms(median(times["hook"])-median(floor)), ms(median(paired(times["hook"], floor))))
	}
}

// variantNames orders the report: plain first, the floors last.
var variantNames = []string{"plain", "hook", "nvcdi", "compare", "true", "emptygo"}

func copyFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o755)
}

// removeCgroupParents removes the parent cgroup runc made in each
// hierarchy; runc removes only the containers' own.
func removeCgroupParents() {
	dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/*", cgroupParent))
	dirs = append(dirs, filepath.Join("/sys/fs/cgroup", cgroupParent))
	for _, d := range dirs {
		os.Remove(d)
	}
}
