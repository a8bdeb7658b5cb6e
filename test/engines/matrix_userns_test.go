package engines

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// The user-namespace matrix: the request forms of the other matrices, in
// containers whose root is not the host's (podman --userns=auto and
// keep-id, Docker's userns-remap). The CDI hook then runs inside the
// container's user namespace, where the engine's root-owned bundle cannot
// be read; each cell checks from inside the container that it really is
// remapped and that the GPU works.

// remapUser is the user dockerd --userns-remap maps container root to.
const remapUser = "wgm-remap"

// usernsIDs gives the command's own mount namespace subordinate ids for
// podman's --userns=auto (user "containers") and for remapUser, and
// remapUser itself in passwd and group, by bind mounts: the host's and
// the cached root's files stay as they are.
const usernsIDs = `printf 'containers:2000000:1000000\n` + remapUser + `:3000000:65536\n' > /run/wgm-subid
mount --bind /run/wgm-subid /etc/subuid
mount --bind /run/wgm-subid /etc/subgid
cp /etc/passwd /run/wgm-passwd && echo '` + remapUser + `:x:60999:60999::/nonexistent:/usr/sbin/nologin' >> /run/wgm-passwd
mount --bind /run/wgm-passwd /etc/passwd
cp /etc/group /run/wgm-group && echo '` + remapUser + `:x:60999:' >> /run/wgm-group
mount --bind /run/wgm-group /etc/group
`

// remapped prints the container's uid map first, so that each cell can
// check it runs in a user namespace of its own.
const remapped = `echo "uidmap $(head -n1 /proc/self/uid_map)"; `

// checkRemapped fails unless the container's root is host uid hostRoot
// (any uid but 0 when hostRoot is -1).
func checkRemapped(t *testing.T, out string, hostRoot int) {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		f, ok := strings.CutPrefix(l, "uidmap ")
		if !ok {
			continue
		}
		m := strings.Fields(f)
		if len(m) != 3 || m[0] != "0" || m[1] == "0" || (hostRoot >= 0 && m[1] != strconv.Itoa(hostRoot)) {
			t.Errorf("the container's root is not remapped (want host uid %d): uid_map %q", hostRoot, f)
		}
		return
	}
	t.Errorf("no uid map in the container's output:\n%s", out)
}

// usernsPodmanRows are the podman request forms, CDI and hooks.d.
var usernsPodmanRows = []gpuRow{
	{name: "--gpus all", args: []string{"--gpus", "all"}, folders: nvidiaOnly},
	{name: "--device nvidia.com/gpu=0", args: []string{"--device", "nvidia.com/gpu=0"}, folders: nvidiaOnly},
	{name: "--device wsl-gpu-hook.dev/gpu=intel", args: []string{"--device", "wsl-gpu-hook.dev/gpu=intel"}, folders: intelOnly},
	{name: "two CDI devices", args: []string{"--device", "nvidia.com/gpu=all", "--device", "wsl-gpu-hook.dev/gpu=intel"}, folders: allGPUs},
	{name: "hooks.d annotation", args: []string{"--annotation", "wsl-gpu-hook/devices=all"}, folders: allGPUs},
}

// usernsModes are podman's user-namespace modes for a rootful container;
// root is the host uid the container's root maps to (-1: any but 0).
// --userns=keep-id is not among them: run by root, podman 5.4 maps every
// id to itself (uid_map "0 0 4294967295", no user namespace of the
// container's own) and podman 4.3 refuses it; rootless_test has keep-id.
var usernsModes = []struct {
	flag string
	root int
}{
	{flag: "--userns=auto", root: 2000000},
}

// TestMatrixUsernsPodman runs podman's request forms in containers with a
// user namespace of their own, on each rootful podman column.
func TestMatrixUsernsPodman(t *testing.T) {
	m := setupMatrix(t)
	e := m.e
	// The remapped root runs the hook binary from the scratch dir.
	if err := os.Chmod(e.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	mountsBefore := hostWSLMounts(t)
	for _, col := range podmanColumns {
		if col.cgroup != "" {
			continue // crun on cgroup v2 only: its column of the podman matrix
		}
		t.Run(col.name, func(t *testing.T) {
			w := col.world(t, m)
			w.setup = usernsIDs
			dir := shortTemp(t, "wgm-upodman-")
			if err := os.Chmod(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			base := col.podman(t, m, dir)
			// --userns=auto sizes the namespace from the image: an image
			// in podman's storage, not --rootfs.
			if out, err := m.runIn(t, w, append(append([]string{}, base...), "import", e.imgTar, "wslgpu-test")...); err != nil {
				t.Fatalf("podman import: %v\n%s", err, out)
			}
			for _, mode := range usernsModes {
				t.Run(mode.flag, func(t *testing.T) {
					for _, row := range usernsPodmanRows {
						t.Run(row.name, func(t *testing.T) {
							if why, ok := col.skip[row.name]; ok {
								t.Skip(why)
							}
							args := append(append([]string{}, base...), "run", "--rm", "--network", "none",
								"--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024", mode.flag)
							args = append(append(args, row.args...), "wslgpu-test", "sh", "-c", remapped+inside)
							out, err := m.runIn(t, w, args...)
							if err != nil {
								t.Fatalf("podman run: %v\n%s\nhook log:\n%s", err, out, m.hookLogTail())
							}
							checkRemapped(t, out, mode.root)
							checkRow(t, e, out, row.folders(e))
						})
					}
				})
			}
		})
	}
	m.hostClean(t, mountsBefore)
}

// usernsDockerRows are Docker's request forms: CDI, the legacy --gpus
// prestart hook and the runtime wrapper.
var usernsDockerRows = []gpuRow{
	{name: "--device nvidia.com/gpu=all", args: []string{"--device", "nvidia.com/gpu=all"}, folders: nvidiaOnly},
	{name: "--device wsl-gpu-hook.dev/gpu=intel", args: []string{"--device", "wsl-gpu-hook.dev/gpu=intel"}, folders: intelOnly},
	{name: "--gpus all", args: []string{"--gpus", "all"}, folders: allGPUs},
	{name: "--runtime wsl-gpu", args: []string{"--runtime", "wsl-gpu", "-e", "WSL_GPU_DEVICES=all"}, folders: allGPUs},
}

// TestMatrixUsernsDocker runs Docker's request forms with dockerd
// --userns-remap, so every container's root is remapUser's first
// subordinate id.
func TestMatrixUsernsDocker(t *testing.T) {
	m := setupMatrix(t)
	e := m.e
	if err := os.Chmod(e.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	mountsBefore := hostWSLMounts(t)
	for _, col := range dockerColumns {
		if _, noCDI := col.skip["--device nvidia.com/gpu=all"]; noCDI || col.cdiHook {
			continue // Docker 20.10 has no CDI; the nvidia-cdi-hook column adds no path
		}
		t.Run(col.name, func(t *testing.T) {
			w := col.world(t, m)
			w.setup = usernsIDs
			docker, stop := m.startDockerIn(t, w, "--userns-remap", remapUser)
			defer stop()
			for _, row := range usernsDockerRows {
				t.Run(row.name, func(t *testing.T) {
					args := append(append([]string{"run", "--rm", "--network", "none"}, row.args...), "wslgpu-test", "sh", "-c", remapped+inside)
					out, err := docker(args...)
					if err != nil {
						t.Fatalf("docker run: %v\n%s\nhook log:\n%s", err, out, m.hookLogTail())
					}
					checkRemapped(t, out, 3000000)
					checkRow(t, e, out, row.folders(e))
				})
			}
		})
	}
	m.hostClean(t, mountsBefore)
}

// usernsCRIRows are pods with hostUsers: false, as the kubelet asks
// containerd for them: the device plugin's CDI answer and a RuntimeClass.
var usernsCRIRows = []criRow{
	{name: "hostUsers false pod, CDI nvidia.com/gpu=all", cdi: "nvidia.com/gpu=all", userns: true, folders: nvidiaOnly},
	{name: "hostUsers false pod, CDI wsl-gpu-hook.dev/gpu=intel", cdi: "wsl-gpu-hook.dev/gpu=intel", userns: true, folders: intelOnly},
	{name: "hostUsers false pod, runtime handler wsl-gpu", handler: "wsl-gpu", annotation: "nvidia", userns: true, folders: nvidiaOnly},
}

// TestMatrixUsernsContainerd runs pods with a user namespace of their own
// (CRI UsernsOptions, what the kubelet sends for hostUsers: false) on
// containerd 2.4 + runc 1.5, driven over CRI as the kubelet does.
func TestMatrixUsernsContainerd(t *testing.T) {
	m := setupMatrix(t)
	e := m.e
	if err := os.Chmod(e.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	mountsBefore := hostWSLMounts(t)
	col := containerdColumns[len(containerdColumns)-1] // containerd 2.4 + runc 1.5
	t.Run(col.name, func(t *testing.T) {
		w := col.world(t, m)
		dir := shortTemp(t, "wgm-uctrd-")
		if err := os.Chmod(dir, 0o711); err != nil {
			t.Fatal(err)
		}
		d, sock, ctr := col.start(t, m, w, dir)
		defer d.stop(t)
		importImages(t, e, dir, ctr)
		rt, closeConn := criClient(t, sock)
		defer closeConn()
		for i, row := range usernsCRIRows {
			t.Run(row.name, func(t *testing.T) {
				out, err := criRun(t, rt, dir, 100+i, row)
				if err != nil {
					t.Fatalf("%v\nhook log:\n%s\ncontainerd:\n%s", err, m.hookLogTail(), tail(grepLines(d.stderr.String(), "level=error"), 10))
				}
				checkRemapped(t, out, 4000000)
				checkRow(t, e, out, row.folders(e))
			})
		}
	})
	m.hostClean(t, mountsBefore)
}
