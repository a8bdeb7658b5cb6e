package devcgroup

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	"github.com/moby/sys/mountinfo"
)

// membership is where a process sits in the two hierarchies that can restrict
// device access, as /proc/<pid>/cgroup names them: paths start with "/" and
// are relative to the reader's cgroup namespace; "" means not a member.
type membership struct {
	devices string // the cgroup v1 hierarchy holding the devices controller
	unified string // the cgroup v2 hierarchy
}

// parseProcCgroup reads /proc/<pid>/cgroup: lines of
// "hierarchy-ID:controller-list:path", where cgroup v2 is "0::path".
// The kernel prints the path unescaped, so it is everything after the second
// colon, spaces and colons included.
func parseProcCgroup(r io.Reader) (membership, error) {
	var m membership
	s := bufio.NewScanner(r)
	for n := 1; s.Scan(); n++ {
		line := s.Text()
		if line == "" {
			continue
		}
		id, rest, ok1 := strings.Cut(line, ":")
		controllers, p, ok2 := strings.Cut(rest, ":")
		if !ok1 || !ok2 || !strings.HasPrefix(p, "/") {
			return membership{}, fmt.Errorf("line %d %q: want hierarchy-ID:controllers:/path", n, line)
		}
		if id == "0" && controllers == "" {
			m.unified = p
			continue
		}
		if slices.Contains(strings.Split(controllers, ","), "devices") {
			m.devices = p
		}
	}
	if err := s.Err(); err != nil {
		return membership{}, err
	}
	return m, nil
}

// cgroupMounts reads the cgroup and cgroup2 mounts of the mount table r
// (/proc/<pid>/mountinfo). Only their lines are parsed: a host running
// containers has a line per overlay, volume and namespace file, and
// parsing each costs the hook, in a fresh process, allocations and page
// faults that grow with the number of containers. The text " - cgroup " or
// " - cgroup2 " can only be the separator and the type: the kernel escapes
// spaces in paths as \040, and the type comes before the source and the
// superblock options. A malformed line of another type is not read at all.
func cgroupMounts(r io.Reader) ([]*mountinfo.Info, error) {
	lines, err := cgroupLines(r)
	if err != nil {
		return nil, err
	}
	return mountinfo.GetMountsFromReader(bytes.NewReader(lines), mountinfo.FSTypeFilter("cgroup", "cgroup2"))
}

// cgroupLines copies the lines of r whose type is cgroup or cgroup2. A
// line longer than the reader's buffer (an overlay with many layers) is
// gathered whole before it is looked at.
func cgroupLines(r io.Reader) ([]byte, error) {
	br := bufio.NewReaderSize(r, 4096)
	var out, long []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			long = append(long, chunk...)
			continue
		}
		line := chunk
		if long != nil {
			line, long = append(long, chunk...), nil
		}
		if bytes.Contains(line, []byte(" - cgroup ")) || bytes.Contains(line, []byte(" - cgroup2 ")) {
			out = append(out, line...)
			if !bytes.HasSuffix(line, []byte("\n")) {
				out = append(out, '\n')
			}
		}
		switch {
		case err == io.EOF:
			return out, nil
		case err != nil:
			return nil, err
		}
	}
}

// location is a cgroup directory found through a mount: the mount, and the
// directory's path below the mount point ("." for the mount point itself).
type location struct {
	mount *mountinfo.Info
	rel   string
}

// dir is the cgroup directory's path as the caller sees it, for messages.
func (l location) dir() string {
	return path.Join(l.mount.Mountpoint, l.rel)
}

// findMount picks the mount through which the cgroup at cgPath is reached:
// a cgroup v1 mount holding the devices controller, or (v2) a cgroup2 mount.
// Of the mounts whose root contains cgPath, the one with the shortest root
// wins (a plain mount of the hierarchy beats a bind mount of a sub-cgroup).
// ok is false when no mount of that hierarchy exists at all.
func findMount(mounts []*mountinfo.Info, v2 bool, cgPath string) (loc location, ok bool, err error) {
	// The kernel shows a cgroup outside the reader's cgroup namespace as
	// "/../..."; cgroup names themselves can never be "." or "..".
	for _, elem := range strings.Split(cgPath, "/") {
		if elem == "." || elem == ".." {
			return location{}, true, fmt.Errorf("cgroup %q lies outside this process's cgroup namespace: run the hook in the host's cgroup namespace", cgPath)
		}
	}
	var roots []string
	for _, m := range mounts {
		if v2 && m.FSType != "cgroup2" ||
			!v2 && (m.FSType != "cgroup" || !slices.Contains(strings.Split(m.VFSOptions, ","), "devices")) {
			continue
		}
		roots = append(roots, m.Root)
		rel, inside := below(m.Root, cgPath)
		if !inside || loc.mount != nil && len(loc.mount.Root) <= len(m.Root) {
			continue
		}
		loc = location{mount: m, rel: rel}
	}
	if roots == nil {
		return location{}, false, nil
	}
	if loc.mount == nil {
		return location{}, true, fmt.Errorf("cgroup %q is not below the root of any mount of its hierarchy (roots %q): run the hook in the host's mount and cgroup namespaces", cgPath, roots)
	}
	return loc, true, nil
}

// below returns p relative to root ("." for root itself) if p is root or
// lies under it.
func below(root, p string) (string, bool) {
	rest := ""
	switch {
	case root == "/":
		rest = strings.TrimPrefix(p, "/")
	case p == root:
	default:
		var ok bool
		if rest, ok = strings.CutPrefix(p, root+"/"); !ok {
			return "", false
		}
	}
	if rest == "" {
		return ".", true
	}
	return rest, true
}
