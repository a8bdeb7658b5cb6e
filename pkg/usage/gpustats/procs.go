package gpustats

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/usage/containernames"
)

// Process is a process that holds the dxg device open.
type Process struct {
	PID int `json:"pid"`
	// NSPID is its pid in its own pid namespace: the number dxgkrnl
	// recorded and resolves.
	NSPID int    `json:"nsPid"`
	Comm  string `json:"comm"`
	// Container is the container id the cgroup path names (12 hex
	// digits), Pod the Kubernetes pod UID; "" when the cgroup says none.
	Container string `json:"container,omitempty"`
	Pod       string `json:"pod,omitempty"`
	// Namespace, PodName and ContainerName are the names people know
	// the pod and container by, where Options.Names knew them.
	Namespace     string `json:"namespace,omitempty"`
	PodName       string `json:"podName,omitempty"`
	ContainerName string `json:"containerName,omitempty"`
	// Ambiguous: another dxg process has the same NSPID.
	Ambiguous bool `json:"ambiguous,omitempty"`
}

// DxgProcesses lists the processes under procRoot with an fd on the
// character device at device: an fd whose path is named like the device
// (its base name, or "dxg" as in every container's /dev) and that is a
// character device with the device's number, so a container's own node or
// bind mount counts. Processes that vanish or cannot be read (another
// user's, without root) are skipped.
//
// It never waits for a filesystem: the links in /proc/PID/fd are answered
// by procfs from the kernel's own records, and only an fd named like the
// device is stat'ed, with AT_STATX_DONT_SYNC (the attributes the kernel
// has, not asked of an NFS, 9p or FUSE server). A process holding a file
// on a hung mount (/mnt/c on WSL, a dead FUSE daemon) would otherwise
// stall the scan for as long as the mount hangs.
func DxgProcesses(procRoot, device string) ([]Process, error) {
	var st unix.Stat_t
	if err := unix.Stat(device, &st); err != nil {
		return nil, fmt.Errorf("stat %s: %w", device, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR {
		return nil, fmt.Errorf("%s is not a character device", device)
	}
	node := deviceNode{rdev: st.Rdev, names: []string{filepath.Base(device), "dxg"}}
	dirs, err := os.ReadDir(procRoot)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var out []Process
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || !node.heldBy(filepath.Join(procRoot, d.Name(), "fd")) {
			continue
		}
		p := Process{PID: pid, NSPID: pid}
		base := filepath.Join(procRoot, d.Name())
		if b, err := os.ReadFile(filepath.Join(base, "comm")); err == nil {
			p.Comm = strings.TrimSpace(string(b))
		}
		if f, err := os.Open(filepath.Join(base, "status")); err == nil {
			if ns := parseNSPid(f); ns > 0 {
				p.NSPID = ns
			}
			f.Close()
		}
		if b, err := os.ReadFile(filepath.Join(base, "cgroup")); err == nil {
			p.Container, p.Pod = ParseCgroup(string(b))
		}
		out = append(out, p)
	}
	markAmbiguous(out)
	return out, nil
}

// deviceNode is what an fd must be to be the device.
type deviceNode struct {
	rdev  uint64
	names []string
}

// heldBy says whether a process (its /proc/PID/fd) holds the node.
func (n deviceNode) heldBy(fdDir string) bool {
	fds, err := os.ReadDir(fdDir)
	if err != nil {
		return false
	}
	for _, fd := range fds {
		p := filepath.Join(fdDir, fd.Name())
		// Sockets, pipes and anonymous inodes ("socket:[123]") are most
		// fds; files elsewhere are named otherwise. Reading the link asks
		// procfs, never the file's filesystem.
		link, err := os.Readlink(p)
		if err != nil || !n.named(link) {
			continue
		}
		var st unix.Statx_t
		if unix.Statx(unix.AT_FDCWD, p, unix.AT_STATX_DONT_SYNC, unix.STATX_TYPE, &st) == nil &&
			st.Mode&unix.S_IFMT == unix.S_IFCHR && unix.Mkdev(st.Rdev_major, st.Rdev_minor) == n.rdev {
			return true
		}
	}
	return false
}

// named says whether an fd's link is a path named like the node; a node
// removed while open reads "PATH (deleted)".
func (n deviceNode) named(link string) bool {
	if !strings.HasPrefix(link, "/") {
		return false
	}
	return slices.Contains(n.names, path.Base(strings.TrimSuffix(link, " (deleted)")))
}

// parseNSPid reads the last NSpid field of /proc/PID/status: the pid in
// the innermost namespace.
func parseNSPid(r io.Reader) int {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "NSpid:"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				return 0
			}
			n, _ := strconv.Atoi(f[len(f)-1])
			return n
		}
	}
	return 0
}

func markAmbiguous(ps []Process) {
	seen := map[int]int{}
	for _, p := range ps {
		seen[p.NSPID]++
	}
	for i := range ps {
		ps[i].Ambiguous = seen[ps[i].NSPID] > 1
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].PID < ps[j].PID })
}

var (
	// scopeID is a container's systemd scope: Docker's
	// (system.slice), podman's (machine.slice), containerd's and CRI-O's
	// under a kubelet pod's slice.
	scopeID = regexp.MustCompile(`^(?:docker|cri-containerd|crio|libpod)-([0-9a-f]{64})\.scope$`)
	// bareID is a container's cgroupfs directory: /docker/<id>,
	// /libpod_parent/libpod-<id>, /kubepods/.../pod<uid>/<id> (CRI-O:
	// crio-<id>).
	bareID = regexp.MustCompile(`^(crio-|libpod-)?([0-9a-f]{64})$`)
	// podDir is a kubelet pod's cgroup: kubepods[-QOS]-pod<uid with
	// _>.slice (systemd, with any cgroup root's prefix) or pod<uid>
	// (cgroupfs).
	podDir = regexp.MustCompile(`^(?:[a-z0-9_.]+(?:-[a-z0-9_.]+)*-)?pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})(?:\.slice)?$`)
)

// ParseCgroup finds the container id (shortened to 12 hex digits, as
// docker ps prints it) and the pod UID in a /proc/PID/cgroup file, from
// the cgroup shapes engines and the kubelet make, and nowhere else:
//
//   - systemd driver: <slice>/docker-<id>.scope, libpod-<id>.scope,
//     cri-containerd-<id>.scope, crio-<id>.scope, directly under a slice
//     (system.slice, machine.slice, a pod's kubepods-...-pod<uid>.slice);
//   - cgroupfs: docker/<id>, libpod_parent/libpod-<id>,
//     .../pod<uid>/<id> and .../pod<uid>/crio-<id>;
//   - seen from a cgroup namespace of one's own (a pod's), a path climbs
//     with ".." first: a container there is taken under ".." as under
//     its slice, since only the kernel writes "..".
//
// A process's cgroup path is the engine's down to its container, and
// then whatever the container made below (a container can make cgroups
// in its own): the outermost container is the one the process is in,
// and the pod is taken only above it. Below a systemd service nothing is
// taken, since a service can be delegated its subtree: user@UID.service
// above all, where a user (systemd --user, rootless podman) names its
// own cgroups and could name one after another container's id, to have
// its GPU memory reported under that pod's name. So a rootless engine's
// containers carry no id, which costs nothing but the id: no name
// source asks a rootless engine. An id in any other place (a plain
// /<dir>/<id> runc was given) is not taken either.
func ParseCgroup(s string) (container, pod string) {
	for _, line := range strings.Split(s, "\n") {
		_, path, ok := strings.Cut(line, "::")
		if !ok {
			if i := strings.LastIndexByte(line, ':'); i >= 0 {
				path = line[i+1:]
			}
		}
		c, p := parseCgroupPath(path)
		if container == "" && c != "" {
			container = c
		}
		if pod == "" && p != "" {
			pod = p
		}
	}
	return container, pod
}

// parseCgroupPath is ParseCgroup for one path.
func parseCgroupPath(path string) (container, pod string) {
	parent := ""
	for _, dir := range strings.Split(path, "/") {
		if dir == "" {
			continue
		}
		if strings.HasSuffix(dir, ".service") {
			return "", pod // delegated, or may be: nothing below is an engine's
		}
		if id := containerDir(parent, dir); id != "" {
			return id[:12], pod
		}
		if m := podDir.FindStringSubmatch(dir); m != nil && pod == "" {
			pod = strings.ReplaceAll(m[1], "_", "-")
		}
		parent = dir
	}
	return "", pod
}

// containerDir is the id of dir when an engine or the kubelet names
// containers so under parent, else "".
func containerDir(parent, dir string) string {
	if m := scopeID.FindStringSubmatch(dir); m != nil {
		if parent == ".." || strings.HasSuffix(parent, ".slice") {
			return m[1]
		}
		return ""
	}
	m := bareID.FindStringSubmatch(dir)
	if m == nil {
		return ""
	}
	pod := podDir.MatchString(parent)
	switch prefix := m[1]; {
	case parent == "..",
		prefix == "" && (parent == "docker" || pod),
		prefix == "crio-" && pod,
		prefix == "libpod-" && parent == "libpod_parent":
		return m[2]
	}
	return ""
}

// nameProcesses gives the processes in a container the names srcs know
// for it. A source that fails costs the names, not the figures: the error
// says which.
func nameProcesses(procs []Process, srcs []containernames.Source) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	names, err := containernames.Sources(ctx, srcs...)
	for i, p := range procs {
		if n, ok := containernames.Lookup(names, p.Container); ok {
			procs[i].Namespace, procs[i].PodName, procs[i].ContainerName = n.Namespace, n.Pod, n.Container
		}
	}
	if err != nil {
		return fmt.Errorf("container names: %w", err)
	}
	return nil
}
