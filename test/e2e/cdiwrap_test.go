package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	"tags.cncf.io/container-device-interface/pkg/cdi"
)

// configEnv is how the runtime wrapper, which passes its arguments to runc
// untouched, finds a non-default configuration.
const configEnv = "WSL_GPU_HOOK_CONFIG"

// linkNamed returns a link to bin named name in bin's directory: the hook
// binary acts as the name it is run under.
func linkNamed(t *testing.T, bin, name string) string {
	t.Helper()
	link := filepath.Join(filepath.Dir(bin), name)
	if err := os.Symlink(bin, link); err != nil && !errors.Is(err, os.ErrExist) {
		t.Fatal(err)
	}
	return link
}

// injectCDI does what an engine does with `--device NAME`: it has the hook
// write the CDI specs for the simulated host (under dxgsim, as `cdi
// generate` enumerates), then injects b.cdi into spec with the CDI
// library, the code podman, Docker and containerd use.
func injectCDI(t *testing.T, h *harness, b box, spec *specs.Spec, hookBin, cfgPath, dir string) {
	t.Helper()
	if b.sim == nil {
		t.Fatal("harness: CDI devices need a simulated host (box.sim)")
	}
	specDir := filepath.Join(dir, "cdi")
	if err := os.MkdirAll(specDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// One spec per kind the devices name, each written alone (--output),
	// so no other CDI producer on this machine is consulted.
	devDir := filepath.Join(dir, "dev")
	if b.devDir != "" {
		devDir = b.devDir
	}
	kinds := map[string]bool{}
	for _, d := range b.cdi {
		kind, _, _ := strings.Cut(d, "=")
		if kinds[kind] {
			continue
		}
		kinds[kind] = true
		file := filepath.Join(specDir, strings.NewReplacer("/", "_", ".", "_").Replace(kind)+".json")
		gen := []string{hookBin, "--config", cfgPath, "cdi", "generate", "--kind", kind, "--output", file}
		argv := simArgs(t, h, b.sim, devDir, filepath.Join(dir, "cdi-report"), "", gen)
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("cdi generate --kind %s: %v\n%s", kind, err, out)
		}
	}
	// An engine injects while the host has /dev/dxg, whose numbers it
	// stats; dxgsim made it for `cdi generate` and removed it. A node with
	// the simulator's numbers stands in; dxgsim replaces it for the run.
	node := filepath.Join(devDir, "dxg")
	if err := unix.Mknod(node, unix.S_IFCHR|0o666, int(unix.Mkdev(10, 229))); err != nil {
		t.Fatalf("stand-in for /dev/dxg: %v", err)
	}
	cache, err := cdi.NewCache(cdi.WithSpecDirs(specDir), cdi.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	if errs := cache.GetErrors(); len(errs) > 0 {
		t.Fatalf("CDI specs do not load: %v", errs)
	}
	if unresolved, err := cache.InjectDevices(spec, b.cdi...); err != nil {
		t.Fatalf("inject CDI devices %q (unresolved %q): %v", b.cdi, unresolved, err)
	}
	if b.cdiLegacyHook {
		old := spec.Hooks.CreateContainer[0]
		old.Args = append([]string{}, old.Args[:len(old.Args)-1]...) // drop the selection
		spec.Hooks.CreateContainer = []specs.Hook{old}
	}
}
