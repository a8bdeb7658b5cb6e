package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/moby/sys/mountinfo"
)

// notOurs are mount points the machine's other users make while a cluster
// runs: engines' containers and network namespaces (Docker, podman,
// containerd on the host), runc's clone of itself, other tests' scratch and
// cached roots. A cluster's own mounts never land there: its daemons run in
// private mount namespaces whose /run, /var/lib and /etc are the node's.
var notOurs = []string{"/run/docker/", "/run/containerd/", "/run/containers/", "/run/user/",
	"/var/lib/docker/", "/var/lib/containers/", "/var/cache/wsl-gpu-hook-e2e/", "/var/tmp/"}

// hostMounts returns the host's mount table (the test process's) without
// what notOurs and other runs' temp dirs hold; dir, the cluster's own, is
// kept: that is where a leak would show first.
func hostMounts(dir string) (map[string]bool, error) {
	tmp := filepath.Clean(os.TempDir()) + "/"
	ms, err := mountinfo.GetMounts(func(m *mountinfo.Info) (skip, stop bool) {
		p := m.Mountpoint + "/"
		if strings.HasPrefix(p, dir+"/") {
			return false, false
		}
		if strings.HasPrefix(p, tmp) || strings.HasPrefix(filepath.Base(m.Mountpoint), "runc.") {
			return true, false
		}
		for _, prefix := range notOurs {
			if strings.HasPrefix(p, prefix) {
				return true, false
			}
		}
		return false, false
	})
	if err != nil {
		return nil, err
	}
	set := make(map[string]bool, len(ms))
	for _, m := range ms {
		set[fmt.Sprintf("%s %s %s", m.Mountpoint, m.FSType, m.Source)] = true
	}
	return set, nil
}

// checkHostMounts fails t when the host's mount table has a mount that
// before did not: another test's mount checks would see it.
func (c *Cluster) checkHostMounts(when string) {
	c.t.Helper()
	now, err := hostMounts(c.Dir)
	if err != nil {
		c.t.Errorf("read the host's mount table: %v", err)
		return
	}
	// Named network namespaces are other tools' (podman's netns-*, CNI's
	// cni-*) or other clusters' (wgkN..., from a harness before this
	// one), unless named after this cluster's index.
	ours := fmt.Sprintf("/run/netns/wgk%d", c.index)
	var added []string
	for m := range now {
		if c.mounts[m] {
			continue
		}
		if mp := strings.Fields(m)[0]; strings.HasPrefix(mp, "/run/netns/") &&
			!(strings.HasPrefix(mp, ours) && len(mp) > len(ours) && (mp[len(ours)] < '0' || mp[len(ours)] > '9')) {
			continue
		}
		added = append(added, m)
	}
	if len(added) > 0 {
		c.t.Errorf("cluster %s: the host's mount table has %d new mounts another test would see:\n  %s",
			when, len(added), strings.Join(added, "\n  "))
	}
}
