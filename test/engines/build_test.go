package engines

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// GPU in `docker build`: a Dockerfile's RUN --device=<CDI name> step gets
// the GPU through the engine's own builder (BuildKit inside dockerd, which
// reads the engine's CDI specs since moby 28.3) with the project's specs,
// and through a buildx docker-container builder whose image carries them.
// `docker build` is buildx (the docker CLI plugin, as Docker Desktop and
// docker-ce ship it); without it the CLI falls back to the legacy builder,
// which has no RUN --device.
//
// checkGPUBuilds is the check itself, for any docker CLI (the simulated
// Docker Desktop's too); m.frontendRegistry serves the `# syntax=` image.

// frontendRef is the `# syntax=` reference the local registry serves the
// labs Dockerfile frontend under.
const frontendRef = "wsl-gpu-hook/dockerfile:labs"

// buildCase is one Dockerfile build and what its RUN step must see.
type buildCase struct {
	name    string
	device  string   // RUN --device=; "" asks for none
	allow   bool     // docker build --allow device
	folders []string // driver folders the step must see (nil: no GPU at all)
	fail    string   // the build must fail with this; "" it must succeed
}

// gpuBuildCases are the builds every engine must get right on the
// nvidia-laptop profile: each vendor kind by its CDI name, none without a
// device, and none without the device entitlement (the project's specs do
// not auto-allow, so `--allow device` is the user's consent). A device is
// optional unless marked required: a missing spec or a misspelt name then
// gives a step without a GPU, not an error (BuildKit's rule), which the
// folder check catches; NVIDIA's case is the required form docs/docker.md
// shows, which fails "required device ... is not registered".
func gpuBuildCases(e *env) []buildCase {
	return []buildCase{
		{name: "nvidia.com/gpu=all,required", device: "nvidia.com/gpu=all,required", allow: true, folders: []string{e.nvidia}},
		{name: "wsl-gpu-hook.dev/gpu=intel", device: "wsl-gpu-hook.dev/gpu=intel", allow: true, folders: []string{e.intel}},
		{name: "no device", allow: true},
		{name: "no --allow device", device: "nvidia.com/gpu=all",
			fail: "device nvidia.com/gpu=all is requested by the build but not allowed"},
	}
}

// buildStep is what the RUN step runs: the container check, each line
// marked so it can be told from BuildKit's own progress lines.
const buildStep = `{
[ -e /dev/dxg ] && echo dxg-present || echo dxg-absent
[ -e /usr/lib/wsl ] && echo wsl-present || echo wsl-absent
if [ -e /dev/dxg ]; then ` + "\n" + inside + `fi
} 2>&1 | sed 's/^/gpu-step: /'
`

// checkGPUBuilds builds each case with docker, a docker CLI whose `build`
// is buildx, and checks what the RUN step saw. syntax is the `# syntax=`
// frontend image ("": the daemon's built-in Dockerfile frontend); base is
// the image the Dockerfile starts FROM (it has cudaprobe). The build
// context is written under os.TempDir(): the CLI must see that path.
func checkGPUBuilds(t *testing.T, docker func(args ...string) (string, error), e *env, syntax, base string, cases []buildCase) {
	t.Helper()
	// Without the plugin `docker build` is the legacy builder, which
	// refuses --allow ("unknown flag") and has no RUN --device.
	if out, err := docker("buildx", "version"); err != nil {
		t.Fatalf("docker buildx version: %v (the CLI needs the buildx plugin: hack/engines/build.sh buildx)\n%s", err, out)
	} else {
		t.Logf("%s", strings.TrimSpace(out))
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, err := os.MkdirTemp("", "wgm-build-")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(dir)
			if err := os.Chmod(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			var df strings.Builder
			if syntax != "" {
				fmt.Fprintf(&df, "# syntax=%s\n", syntax)
			}
			fmt.Fprintf(&df, "FROM %s\nCOPY step.sh /step.sh\nRUN ", base)
			if c.device != "" {
				fmt.Fprintf(&df, "--device=%s ", c.device)
			}
			df.WriteString("sh /step.sh\n")
			for name, data := range map[string]string{"Dockerfile": df.String(), "step.sh": buildStep} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			// --network none: the step needs no network (and the test
			// engines have no bridge); --no-cache: the step runs every time.
			args := []string{"build", "--progress=plain", "--no-cache", "--network", "none"}
			if c.allow {
				args = append(args, "--allow", "device")
			}
			out, err := docker(append(args, dir)...)
			if c.fail != "" {
				if err == nil {
					t.Fatalf("docker build succeeded, want it to fail with %q:\n%s", c.fail, out)
				}
				if !strings.Contains(out, c.fail) {
					t.Fatalf("docker build failed without %q:\n%s", c.fail, out)
				}
				t.Logf("failed as it must:\n%s", grepLines(out, c.fail))
				return
			}
			if err != nil {
				t.Fatalf("docker build: %v\n%s", err, out)
			}
			// The daemon names the frontend image it ran: without this a
			// `# syntax=` line it ignored would pass unseen.
			if syntax != "" && !strings.Contains(out, "resolve image config for docker-image://"+syntax) {
				t.Errorf("the build did not run the frontend %s:\n%s", syntax, out)
			}
			step := stepOutput(out)
			t.Logf("RUN step:\n%s", step)
			if c.folders == nil {
				for _, want := range []string{"dxg-absent", "wsl-absent"} {
					if !strings.Contains(step, want) {
						t.Errorf("a build without a device: step output lacks %q:\n%s", want, out)
					}
				}
				return
			}
			if !strings.Contains(step, "wsl-present") {
				t.Errorf("step output lacks wsl-present:\n%s", out)
			}
			checkRow(t, e, step, c.folders)
		})
	}
}

// stepOutput picks the RUN step's marked lines out of a --progress=plain
// build log ("#7 0.215 gpu-step: dxg-open").
func stepOutput(log string) string {
	var b strings.Builder
	for _, l := range strings.Split(log, "\n") {
		if _, s, ok := strings.Cut(l, "gpu-step: "); ok {
			b.WriteString(s + "\n")
		}
	}
	return b.String()
}

// frontendRegistry serves the labs Dockerfile frontend, built from
// BuildKit's module (hack/engines/build.sh dockerfile-frontend) and packed
// with hack/ociimage, from CNCF distribution's registry on 127.0.0.1, so
// a `# syntax=` build stays offline. It returns the registry and the
// `# syntax=` reference. A daemon pulls from 127.0.0.0/8 over plain HTTP
// without configuration (Docker's default insecure registries, BuildKit's
// localhost rule), as from any registry. A registry, not `docker load`:
// dockerd's builder does take a loaded image (it looks in its own store
// first), but a pull is what users' `# syntax=` lines do, it needs no stdin
// or file on the daemon's side, and a docker-container builder, which
// cannot see the daemon's images, pulls the same way.
func (m *matrix) frontendRegistry(t *testing.T) (*localRegistry, string) {
	t.Helper()
	frontend := filepath.Join(m.engine(t, "dockerfile-frontend"), "dockerfile-frontend")
	r := m.startRegistry(t)
	// The labels of BuildKit's own frontend image (its
	// frontend/dockerfile/cmd/dockerfile-frontend/Dockerfile): the frontend
	// runs without a network (without this label dockerd gives it the
	// default bridge, and the test engines have none: "network bridge not
	// found"), and the gateway capabilities it uses.
	ref := r.push(t, frontendRef,
		"--add", frontend+":/bin/dockerfile-frontend:0755", "--entrypoint", "/bin/dockerfile-frontend",
		"--label", "moby.buildkit.frontend.network.none=true",
		"--label", "moby.buildkit.frontend.caps=moby.buildkit.frontend.inputs,moby.buildkit.frontend.subrequests,"+
			"moby.buildkit.frontend.contexts,moby.buildkit.frontend.gitquerystring,moby.buildkit.frontend.contexts.zstd")
	return r, ref
}

// localRegistry is CNCF distribution's registry on 127.0.0.1, stopped when
// the test ends.
type localRegistry struct {
	addr string
	dir  string
	log  *bytes.Buffer
}

func (m *matrix) startRegistry(t *testing.T) *localRegistry {
	t.Helper()
	registry := filepath.Join(m.engine(t, "registry"), "registry")
	r := &localRegistry{addr: freeLoopbackAddr(t), dir: t.TempDir(), log: &bytes.Buffer{}}
	cfg := fmt.Sprintf("version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: %s\n", filepath.Join(r.dir, "data"), r.addr)
	if err := os.WriteFile(filepath.Join(r.dir, "config.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	reg := exec.Command(registry, "serve", filepath.Join(r.dir, "config.yml"))
	reg.Stdout, reg.Stderr = r.log, r.log
	reg.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := reg.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		reg.Process.Signal(syscall.SIGTERM)
		reg.Wait()
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get("http://" + r.addr + "/v2/")
		if err == nil {
			resp.Body.Close()
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("registry did not come up on %s: %v\n%s", r.addr, err, r.log.String())
		}
	}
}

// push packs an image for this machine's architecture with hack/ociimage
// (ociimage's flags: --add, --dir, --entrypoint...), pushes it as ref
// (name:tag) and returns the reference a daemon pulls it by.
func (r *localRegistry) push(t *testing.T, ref string, ociimage ...string) string {
	t.Helper()
	archive := filepath.Join(r.dir, strings.NewReplacer("/", "_", ":", "_").Replace(ref)+".tar")
	cmd := exec.Command("go", append([]string{"run", "./hack/ociimage", "--out", archive, "--tag", "localhost/" + ref, "--arch", runtime.GOARCH}, ociimage...)...)
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/ociimage %s: %v\n%s", ref, err, out)
	}
	name, tag, _ := strings.Cut(ref, ":")
	if err := pushOCIArchive("http://"+r.addr, name, tag, archive); err != nil {
		t.Fatalf("push %s to the registry: %v\n%s", ref, err, r.log.String())
	}
	return r.addr + "/" + ref
}

// freeLoopbackAddr is a 127.0.0.1 port free a moment ago.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// pushOCIArchive pushes the single image of an OCI archive (hack/ociimage's
// output: index.json naming one manifest) to a registry as name:tag, with
// the distribution API's monolithic blob uploads.
func pushOCIArchive(base, name, tag, archive string) error {
	blobs, err := readTar(archive)
	if err != nil {
		return err
	}
	var index struct {
		Manifests []struct {
			MediaType string `json:"mediaType"`
			Digest    string `json:"digest"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(blobs["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		return fmt.Errorf("index.json: want one manifest, got %d (%v)", len(index.Manifests), err)
	}
	manifest := index.Manifests[0]
	for path, data := range blobs {
		digest, ok := strings.CutPrefix(path, "blobs/sha256/")
		if !ok || "sha256:"+digest == manifest.Digest {
			continue
		}
		resp, err := http.Post(base+"/v2/"+name+"/blobs/uploads/", "", nil)
		if err != nil {
			return err
		}
		resp.Body.Close()
		loc := resp.Header.Get("Location")
		if resp.StatusCode != http.StatusAccepted || loc == "" {
			return fmt.Errorf("start upload: %s", resp.Status)
		}
		sep := "?"
		if strings.Contains(loc, "?") {
			sep = "&"
		}
		if !strings.HasPrefix(loc, "http") {
			loc = base + loc
		}
		if err := put(loc+sep+"digest=sha256:"+digest, "application/octet-stream", data); err != nil {
			return fmt.Errorf("blob %s: %w", digest, err)
		}
	}
	data := blobs["blobs/sha256/"+strings.TrimPrefix(manifest.Digest, "sha256:")]
	if err := put(base+"/v2/"+name+"/manifests/"+tag, manifest.MediaType, data); err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	return nil
}

func put(url, contentType string, data []byte) error {
	req, err := http.NewRequest(http.MethodPut, url, bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		body, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("PUT: %s: %s", resp.Status, body)
	}
	return nil
}

// readTar reads every regular file of a tar archive into memory (the
// frontend image is a few MB).
func readTar(path string) (map[string][]byte, error) {
	out, err := exec.Command("tar", "-tf", path).Output()
	if err != nil {
		return nil, fmt.Errorf("tar -tf %s: %w", path, err)
	}
	files := map[string][]byte{}
	for _, name := range strings.Fields(string(out)) {
		if strings.HasSuffix(name, "/") {
			continue
		}
		data, err := exec.Command("tar", "-xOf", path, name).Output()
		if err != nil {
			return nil, fmt.Errorf("tar -xOf %s %s: %w", path, name, err)
		}
		files[name] = data
	}
	return files, nil
}

// withBuildx puts buildx (built from its module, hack/engines/build.sh
// buildx) where w's docker CLI looks for plugins, in the world's own mount
// namespace: `docker build` then runs BuildKit builds.
func (m *matrix) withBuildx(t *testing.T, w world) world {
	t.Helper()
	buildx := filepath.Join(m.engine(t, "buildx"), "docker-buildx")
	w.setup += fmt.Sprintf("mkdir -p /usr/libexec/docker/cli-plugins\nln -sf %s /usr/libexec/docker/cli-plugins/docker-buildx\n", buildx)
	return w
}

// TestDockerBuildGPU builds Dockerfiles whose RUN --device step asks for a
// GPU by its CDI name on the Docker 29 daemon of the Debian 13 world: first
// with no spec (the engine as it is before `wsl-gpu-hook install cdi`),
// then with the specs that command wrote, put where the running engine
// reads them; through the daemon's built-in Dockerfile frontend, through
// the labs frontend image named by `# syntax=`, served from a local
// registry, and on a buildx docker-container builder.
func TestDockerBuildGPU(t *testing.T) {
	m := setupMatrix(t)
	mountsBefore := hostWSLMounts(t)
	// After the daemon stopped (deferred below): no build step's mount
	// and no spec of ours may be left on the host.
	t.Cleanup(func() { m.hostClean(t, mountsBefore) })
	reg, syntax := m.frontendRegistry(t)
	w := m.withBuildx(t, goModules(t, m))
	// The engine's /run/cdi is a dir the test fills after the start (the
	// prelude's copy of the specs is hidden under it).
	specs := shortTemp(t, "wgm-cdi-")
	w.setup += fmt.Sprintf("mount --bind %s /run/cdi\n", specs)
	docker, stop := m.startDockerIn(t, w)
	defer stop()
	t.Run("before install cdi", func(t *testing.T) {
		checkGPUBuilds(t, docker, m.e, "", "wslgpu-test", []buildCase{{
			name: "nvidia.com/gpu=all,required", device: "nvidia.com/gpu=all,required", allow: true,
			fail: `required device "nvidia.com/gpu=all" is not registered`,
		}})
	})
	files, _ := filepath.Glob(filepath.Join(m.specs, "*"))
	if len(files) == 0 {
		t.Fatalf("no CDI specs in %s", m.specs)
	}
	if out, err := exec.Command("cp", append(files, specs)...).CombinedOutput(); err != nil {
		t.Fatalf("cp specs: %v\n%s", err, out)
	}
	// The engine's CDI cache watches its spec dirs: no restart. The
	// builder lists the devices it now has, as a user checks.
	var inspect string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		out, err := docker("buildx", "inspect")
		inspect = out
		if err == nil && strings.Contains(out, "nvidia.com/gpu=all") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("docker buildx inspect lists no nvidia.com/gpu=all 30s after the specs were written: %v\n%s", err, out)
		}
	}
	if i := strings.Index(inspect, "Devices:"); i >= 0 {
		inspect = inspect[i:]
	}
	devices, _, _ := strings.Cut(inspect, "GC Policy")
	t.Logf("docker buildx inspect:\n%s", devices)
	for _, f := range []struct{ name, syntax string }{
		{"built-in frontend", ""},
		{"# syntax= labs frontend", syntax},
	} {
		t.Run(f.name, func(t *testing.T) {
			checkGPUBuilds(t, docker, m.e, f.syntax, "wslgpu-test", gpuBuildCases(m.e))
		})
	}
	t.Run("docker-container builder", func(t *testing.T) {
		m.checkContainerBuilder(t, docker, reg, syntax)
	})
}

// checkContainerBuilder runs the builds on a buildx docker-container
// builder: BuildKit in a container of the engine, which sees nothing of
// the engine's CDI specs or images. Its image (BuildKit's buildkitd and
// buildctl built from the module, runc) carries the project's specs in
// /etc/buildkit/cdi and the hook they name at its path, as a user's own
// builder image would; buildx starts it with --gpus all, which gives it
// /dev/dxg and /usr/lib/wsl; the base image comes from the registry.
func (m *matrix) checkContainerBuilder(t *testing.T, docker func(args ...string) (string, error), reg *localRegistry, syntax string) {
	t.Helper()
	bk := m.engine(t, "buildkitd")
	runc := filepath.Join(m.engine(t, "runc"), "runc")
	args := []string{"--dir", m.e.rootfs,
		"--add", filepath.Join(bk, "buildkitd") + ":/usr/bin/buildkitd:0755",
		"--add", filepath.Join(bk, "buildctl") + ":/usr/bin/buildctl:0755",
		"--add", runc + ":/usr/bin/runc:0755",
		// runc links libseccomp (hack/engines/build.sh: cgo, seccomp tag).
		"--add", "/lib/x86_64-linux-gnu/libseccomp.so.2:/lib/x86_64-linux-gnu/libseccomp.so.2:0644",
		"--add", m.e.hook + ":" + m.e.hook + ":0755",
		"--add", m.config + ":" + m.config + ":0644",
		"--mkdir", "/etc/buildkit/cdi", "--mkdir", "/run", "--mkdir", "/var/lib/buildkit",
		"--env", "PATH=/usr/bin:/bin", "--entrypoint", "/usr/bin/buildkitd",
	}
	specs, _ := filepath.Glob(filepath.Join(m.specs, "*"))
	for _, f := range specs {
		args = append(args, "--add", f+":/etc/buildkit/cdi/"+filepath.Base(f)+":0644")
	}
	image := reg.push(t, "wsl-gpu-hook/buildkit:wsl-gpu", args...)
	base := reg.push(t, "wsl-gpu-hook/wslgpu-test:latest", "--dir", m.e.rootfs)
	const name = "wslgpu-container"
	// network=host: the builder pulls from the registry on 127.0.0.1 (the
	// test engines have no bridge). buildkitd 0.33 grants the device
	// entitlement to a build that asks without --allow-insecure-entitlement
	// (seen: the builds pass without it).
	out, err := docker("buildx", "create", "--name", name, "--driver", "docker-container",
		"--driver-opt", "image="+image, "--driver-opt", "network=host",
		"--buildkitd-flags", "--oci-worker-net=host", "--bootstrap")
	if err != nil {
		t.Fatalf("docker buildx create: %v\n%s", err, out)
	}
	defer docker("buildx", "rm", name)
	// buildx asked for every GPU for its container (docker run --gpus all):
	// what gives the builder /dev/dxg and the driver folders its steps'
	// hooks bind.
	out, err = docker("inspect", "--format", "{{json .HostConfig.DeviceRequests}}", "buildx_buildkit_"+name+"0")
	if err != nil || !strings.Contains(out, `"Count":-1`) || !strings.Contains(out, `[["gpu"]]`) {
		t.Errorf("the builder container's device requests are not --gpus all: %v\n%s", err, out)
	}
	build := func(args ...string) (string, error) {
		if len(args) > 0 && args[0] == "build" {
			args = append([]string{"buildx", "build", "--builder", name}, args[1:]...)
		}
		return docker(args...)
	}
	checkGPUBuilds(t, build, m.e, syntax, base, gpuBuildCases(m.e))
}
