package engines

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImageLoads loads `make image`'s archive as docs/kubernetes.md says a user
// may: `docker load` (Debian's dockerd) and `podman load` (Debian's
// podman), then checks what each engine reports of the image (tag, user,
// entrypoint) and runs the plugin binary from it. ctr import is the
// cluster tests' (test/k8s) path.
func TestImageLoads(t *testing.T) {
	e := setup(t)
	img := projectImage(t)
	ref, archive := img.ref, img.archive
	const want = "65532:65532 [/usr/bin/wsl-gpu-device-plugin]"
	check := func(t *testing.T, engine func(args ...string) (string, error), runArgs ...string) {
		if out, err := engine("load", "-i", archive); err != nil || !strings.Contains(out, ref) {
			t.Fatalf("load: %v\n%s", err, out)
		}
		if out, err := engine("image", "inspect", "--format", "{{.Config.User}} {{.Config.Entrypoint}}", ref); err != nil || strings.TrimSpace(out) != want {
			t.Errorf("image inspect: %v: %q, want %q", err, out, want)
		}
		if out, err := engine(append(append([]string{"run", "--rm", "--net=none"}, runArgs...), ref, "--version")...); err != nil || !strings.Contains(out, "wsl-gpu-device-plugin ") {
			t.Errorf("run the plugin from the loaded image: %v\n%s", err, out)
		}
	}
	t.Run("docker load", func(t *testing.T) {
		docker, _, stop := startDocker(t, e)
		defer stop()
		check(t, docker)
	})
	t.Run("podman load", func(t *testing.T) {
		if _, err := exec.LookPath("podman"); err != nil {
			t.Skip("podman not installed")
		}
		pdir := scratchDir(t)
		// root here may lack CAP_SYS_RESOURCE: podman's default rlimits
		// would fail, as in the other podman tests.
		check(t, func(args ...string) (string, error) { return podman(t, e, pdir, "", args...) },
			"--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024")
	})
}
