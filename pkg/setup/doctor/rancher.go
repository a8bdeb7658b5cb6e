package doctor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/vendors"
)

// Rancher Desktop (docs/desktop.md, "Rancher Desktop"): its engine runs in
// its own WSL distro, which packaging/rancher-desktop/wsl-gpu-hook.start
// provisions at every start.
const (
	// rancherOS is the PRETTY_NAME of that distro's /etc/os-release
	// (files/os-release in rancher-sandbox/rancher-desktop-wsl-distro),
	// which moby's `docker info` prints as its OperatingSystem: public
	// logs of Testcontainers against Rancher Desktop on Windows, moby 26.1
	// to 28.3, print "Operating System: Rancher Desktop WSL Distribution"
	// (found with the search tool; nothing else names it). Its ID was
	// rancher-desktop-wsl-distribution before it became
	// rancher-desktop-wsl-distro; this name is in both.
	rancherOS = "Rancher Desktop WSL Distribution"
	// rancherScript is the provisioning script as the distro sees it:
	// Rancher Desktop links /etc/local.d to its provisioning folder.
	rancherScript = "/etc/local.d/wsl-gpu-hook.start"
	// rancherHome is where the script keeps the binaries and its log.
	rancherHome = "/var/lib/wsl-gpu-hook"
	// rancherRun runs the script now, from Windows or any distro: it
	// copies the hook back from the release folder and writes the specs.
	rancherRun = "rdctl shell sudo sh " + rancherScript
	// rancherInstall is docs/desktop.md's step that installs the script.
	rancherInstall = `in Windows (PowerShell): $p = "$env:LOCALAPPDATA\rancher-desktop\provisioning"; mkdir -Force $p; ` +
		`tar -xzf wsl-gpu-hook_<version>_linux_amd64.tar.gz -C $p; ` +
		`copy $p\wsl-gpu-hook_<version>_linux_amd64\rancher-desktop\wsl-gpu-hook.start $p\; then quit Rancher Desktop and start it again`
)

// checkRancherDesktop says whether Rancher Desktop's containers get the
// GPU. Inside its distro (`rdctl shell`) it reads the files the
// provisioning script installs and writes; from another distro it can ask
// only moby's `docker info` (with its containerd engine there is no
// dockerd to ask), whose DiscoveredDevices (Docker 28.2+) lists the CDI
// devices the engine sees. Anything else adds nothing.
func checkRancherDesktop(o Options, r *Report, facts cdiFacts) {
	if inRancherDistro(o) {
		checkRancherDistro(o, r, facts)
		return
	}
	out, err := o.Engine("docker", "info", "--format", "{{json .}}")
	if err != nil {
		return
	}
	var info struct {
		OperatingSystem   string
		ServerVersion     string
		ClientInfo        struct{ Version string }
		DiscoveredDevices []struct{ Source, ID string }
	}
	if json.Unmarshal(out, &info) != nil || info.OperatingSystem != rancherOS {
		return
	}
	var ids []string
	ours := false
	for _, d := range info.DiscoveredDevices {
		if d.Source == "cdi" {
			ids = append(ids, d.ID)
			ours = ours || strings.HasPrefix(d.ID, vendors.OwnCDIKind+"=") // only our specs define it, for every adapter
		}
	}
	switch {
	case ours:
		r.add("rancher desktop", OK, "", "Rancher Desktop's engine (moby %s) lists our CDI devices: %s: docker run --device "+vendors.OwnCDIKind+"=all", info.ServerVersion, strings.Join(firstN(ids, 6), ", "))
	case !atLeast(info.ServerVersion, 28, 2) || !atLeast(info.ClientInfo.Version, 28, 2):
		// DiscoveredDevices came with API 1.50 (Docker 28.2), and is
		// omitted when empty: an older engine or CLI (a distro's own
		// docker.io, 26.1 in Debian 13) shows none, which says nothing.
		r.add("rancher desktop", Warn, "rdctl shell sudo "+rancherHome+"/wsl-gpu-ctl doctor",
			"cannot tell from here whether Rancher Desktop's containers get the GPU: the engine (moby %s) lists its CDI devices only to a docker CLI of 28.2 or later, and this one is %s; ask in its distro", info.ServerVersion, orUnknown(info.ClientInfo.Version))
	default:
		r.add("rancher desktop", Warn, rancherInstall,
			"Rancher Desktop's engine (moby %s) lists no CDI device of ours: GPU containers fail \"unresolvable CDI devices\"; the provisioning script wsl-gpu-hook.start is not installed, or failed at its last start (rdctl shell sudo cat %s/last-start.log)", info.ServerVersion, rancherHome)
	}
}

// atLeast reports whether a Docker version ("28.3.3", "26.1.5+dfsg1") is
// major.minor or later; an unreadable one is not.
func atLeast(version string, major, minor int) bool {
	var ma, mi int
	if n, _ := fmt.Sscanf(version, "%d.%d", &ma, &mi); n != 2 {
		return false
	}
	return ma > major || ma == major && mi >= minor
}

func orUnknown(s string) string {
	if s == "" {
		return "of unknown version"
	}
	return s
}

// checkRancherDistro judges Rancher Desktop from inside its distro, where
// both engines (containerd, moby) read the CDI dirs doctor checks.
func checkRancherDistro(o Options, r *Report, facts cdiFacts) {
	fi, err := os.Stat(o.resolved(rancherScript))
	script := err == nil && fi.Mode().IsRegular()
	var specs, kinds, hooks, missing []string
	for _, s := range facts.ours {
		specs = append(specs, s.path)
		if !slices.Contains(kinds, s.kind) {
			kinds = append(kinds, s.kind)
		}
		for _, h := range s.hooks {
			if slices.Contains(hooks, h) {
				continue
			}
			hooks = append(hooks, h)
			if _, err := os.Stat(filepath.Join(o.HostRoot, h)); errors.Is(err, fs.ErrNotExist) {
				missing = append(missing, h)
			}
		}
	}
	switch {
	case len(missing) > 0:
		r.add("rancher desktop", Fail, rancherRun, "the CDI specs name the hook %s, which is missing: GPU containers fail to start", strings.Join(missing, ", "))
	case len(specs) > 0 && !script:
		r.add("rancher desktop", Warn, rancherInstall,
			"our CDI specs %s are here, but no provisioning script writes them again: the next Rancher Desktop start empties /var/run/cdi, and an update of its distro replaces /etc", strings.Join(specs, ", "))
	case len(specs) > 0:
		r.add("rancher desktop", OK, "", "its provisioning script %s wrote our CDI specs %s (%s), naming %s: nerdctl or docker run --device "+vendors.OwnCDIKind+"=all",
			rancherScript, strings.Join(specs, ", "), strings.Join(kinds, ", "), strings.Join(hooks, ", "))
	case !script:
		r.add("rancher desktop", Warn, rancherInstall, "Rancher Desktop's containers get no GPU: the provisioning script wsl-gpu-hook.start is not installed")
	default:
		said := lastLine(o.resolved(rancherHome + "/last-start.log"))
		if said == "" {
			said = "nothing (no " + rancherHome + "/last-start.log: Rancher Desktop has not started since it was installed)"
		}
		r.add("rancher desktop", Fail, rancherRun,
			"the provisioning script is installed but no CDI spec of ours is in %s: GPU containers fail \"unresolvable CDI devices\"; its last start said: %s", strings.Join(o.CDIDirs, ", "), said)
	}
}

// inRancherDistro reports whether doctor runs in Rancher Desktop's
// distro, by its os-release (see rancherOS). WSL_DISTRO_NAME would say
// rancher-desktop too, but sudo (rdctl shell sudo ...) drops it.
func inRancherDistro(o Options) bool {
	data, err := os.ReadFile(o.resolved("/etc/os-release"))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if ok && k == "PRETTY_NAME" && strings.Trim(v, `"'`) == rancherOS {
			return true
		}
	}
	return false
}

// lastLine is a small file's last non-empty line, "" when unreadable.
func lastLine(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
