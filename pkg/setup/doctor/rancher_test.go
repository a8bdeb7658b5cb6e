package doctor

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// Rancher Desktop's distro as it names itself: files/os-release of
// rancher-sandbox/rancher-desktop-wsl-distro, now and before (ID changed).
const (
	rancherOSRelease = `NAME="Rancher Desktop WSL Distro"
ID=rancher-desktop-wsl-distro
PRETTY_NAME="Rancher Desktop WSL Distribution"
VERSION_ID="0.92"
`
	rancherOldOSRelease = `NAME="Rancher Desktop WSL Distribution"
ID=rancher-desktop-wsl-distribution
PRETTY_NAME="Rancher Desktop WSL Distribution"
VERSION_ID="0.31"
`
	debianOSRelease = `PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
ID=debian
`
)

// rancherSpec is what the provisioning script writes: our kind, naming
// the hook it keeps in /var/lib.
const rancherSpec = `{"cdiVersion":"0.6.0","kind":"wsl-gpu-hook.dev/gpu","devices":[{"name":"all","containerEdits":{"deviceNodes":[{"path":"/dev/dxg"}]}}],
"containerEdits":{"hooks":[{"hookName":"createContainer","path":"/var/lib/wsl-gpu-hook/wsl-gpu-hook","args":["wsl-gpu-hook","cdi-hook","all"]}]}}`

// TestRancherDesktop: doctor recognises Rancher Desktop, from inside its
// distro (rdctl shell) by the distro's os-release, and from another
// distro by what `docker info` says of its moby engine, and says whether
// its containers get the GPU, with the step that makes them.
func TestRancherDesktop(t *testing.T) {
	const (
		installStep = `in Windows (PowerShell): $p = "$env:LOCALAPPDATA\rancher-desktop\provisioning"; mkdir -Force $p; tar -xzf wsl-gpu-hook_<version>_linux_amd64.tar.gz -C $p; copy $p\wsl-gpu-hook_<version>_linux_amd64\rancher-desktop\wsl-gpu-hook.start $p\; then quit Rancher Desktop and start it again`
		runScript   = "rdctl shell sudo sh /etc/local.d/wsl-gpu-hook.start"
		script      = "/etc/local.d/wsl-gpu-hook.start"
		spec        = "/var/run/cdi/wsl-gpu-hook.dev-gpu.json"
		nvSpec      = "/var/run/cdi/nvidia.com-gpu_wsl-gpu-hook.json"
		ownKind     = "wsl-gpu-hook.dev/gpu"
		hook        = "/var/lib/wsl-gpu-hook/wsl-gpu-hook"
		mobyInfo    = `{"OperatingSystem":"Rancher Desktop WSL Distribution","ServerVersion":"28.3.3","ClientInfo":{"Version":"28.3.3"},"CDISpecDirs":["/etc/cdi","/var/run/cdi"]`
	)
	tests := []struct {
		name      string
		osRelease string
		files     map[string]string // under the root: the distro's files
		hook      bool              // the hook the spec names exists
		info      string            // docker info's JSON; "" has no docker CLI
		status    Status            // "": no rancher desktop line
		stale     bool              // the spec's own cdi line fails too
		detail    string
		fix       string
	}{
		{name: "in the distro, the script wrote the specs", osRelease: rancherOSRelease,
			files: map[string]string{script: "#!/bin/sh\n", spec: rancherSpec, nvSpec: strings.Replace(rancherSpec, ownKind, "nvidia.com/gpu", 1)}, hook: true,
			status: OK, detail: "its provisioning script " + script + " wrote our CDI specs " + nvSpec + ", " + spec + " (nvidia.com/gpu, " + ownKind + "), naming " + hook +
				": nerdctl or docker run --device wsl-gpu-hook.dev/gpu=all"},
		{name: "in the distro, nothing installed", osRelease: rancherOldOSRelease,
			status: Warn, detail: "Rancher Desktop's containers get no GPU: the provisioning script wsl-gpu-hook.start is not installed", fix: installStep},
		{name: "in the distro, specs but no script", osRelease: rancherOSRelease,
			files: map[string]string{spec: rancherSpec}, hook: true,
			status: Warn, detail: "our CDI specs " + spec + " are here, but no provisioning script writes them again: the next Rancher Desktop start empties /var/run/cdi", fix: installStep},
		{name: "in the distro, the script wrote nothing", osRelease: rancherOSRelease,
			files:  map[string]string{script: "#!/bin/sh\n", "/var/lib/wsl-gpu-hook/last-start.log": "2026-11-29T09:00:00Z no wsl-gpu-hook_<version>_linux_amd64 folder next to /etc/local.d/wsl-gpu-hook.start, and nothing in /var/lib/wsl-gpu-hook yet: unpack the release tarball into Rancher Desktop's provisioning folder\n"},
			status: Fail, detail: `the provisioning script is installed but no CDI spec of ours is in /etc/cdi, /var/run/cdi: GPU containers fail "unresolvable CDI devices"; its last start said: 2026-11-29T09:00:00Z no wsl-gpu-hook_<version>_linux_amd64 folder`, fix: runScript},
		{name: "in the distro, the hook is gone", osRelease: rancherOSRelease,
			files:  map[string]string{script: "#!/bin/sh\n", spec: rancherSpec},
			status: Fail, stale: true, detail: "the CDI specs name the hook " + hook + ", which is missing: GPU containers fail to start", fix: runScript},
		{name: "another distro, moby lists our devices", osRelease: debianOSRelease,
			info:   mobyInfo + `,"DiscoveredDevices":[{"Source":"cdi","ID":"nvidia.com/gpu=all"},{"Source":"cdi","ID":"wsl-gpu-hook.dev/gpu=all"}]}`,
			status: OK, detail: "Rancher Desktop's engine (moby 28.3.3) lists our CDI devices: nvidia.com/gpu=all, wsl-gpu-hook.dev/gpu=all"},
		{name: "another distro, moby lists none of ours", osRelease: debianOSRelease,
			info:   mobyInfo + `,"DiscoveredDevices":[{"Source":"cdi","ID":"nvidia.com/gpu=all"}]}`,
			status: Warn, detail: "Rancher Desktop's engine (moby 28.3.3) lists no CDI device of ours", fix: installStep},
		{name: "another distro, moby lists no device at all (omitted when empty)", osRelease: debianOSRelease,
			info:   mobyInfo + `}`,
			status: Warn, detail: "Rancher Desktop's engine (moby 28.3.3) lists no CDI device of ours", fix: installStep},
		{name: "another distro, moby too old to list devices", osRelease: debianOSRelease,
			info:   `{"OperatingSystem":"Rancher Desktop WSL Distribution","ServerVersion":"27.3.1","ClientInfo":{"Version":"28.3.3"},"CDISpecDirs":["/etc/cdi","/var/run/cdi"]}`,
			status: Warn, detail: "the engine (moby 27.3.1) lists its CDI devices only to a docker CLI of 28.2 or later, and this one is 28.3.3", fix: "rdctl shell sudo /var/lib/wsl-gpu-hook/wsl-gpu-ctl doctor"},
		{name: "another distro, its own docker CLI too old to show devices", osRelease: debianOSRelease,
			info:   `{"OperatingSystem":"Rancher Desktop WSL Distribution","ServerVersion":"29.8.0","ClientInfo":{"Version":"26.1.5+dfsg1"}}`,
			status: Warn, detail: "cannot tell from here whether Rancher Desktop's containers get the GPU: the engine (moby 29.8.0) lists its CDI devices only to a docker CLI of 28.2 or later, and this one is 26.1.5+dfsg1; ask in its distro", fix: "rdctl shell sudo /var/lib/wsl-gpu-hook/wsl-gpu-ctl doctor"},
		{name: "a Debian distro with its own dockerd", osRelease: debianOSRelease,
			info: `{"OperatingSystem":"Debian GNU/Linux 12 (bookworm)","ServerVersion":"28.5.2","CDISpecDirs":["/etc/cdi"]}`},
		{name: "Docker Desktop", osRelease: debianOSRelease,
			info: `{"OperatingSystem":"Docker Desktop","ServerVersion":"29.1.3","CDISpecDirs":["/etc/cdi","/var/run/cdi"],"DockerRootDir":"/var/lib/docker"}`},
		{name: "no os-release, no docker"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost(t)
			if tt.osRelease != "" {
				h.rootFile("/etc/os-release", tt.osRelease, 0o644)
			}
			for p, c := range tt.files {
				h.rootFile(p, c, 0o644)
			}
			h.hostFile("/dev/dxg")
			if tt.hook {
				h.hostFile(hook)
			}
			h.opt.Engine = func(cli string, args ...string) ([]byte, error) {
				if tt.info == "" {
					return nil, exec.ErrNotFound
				}
				if cli == "docker" && len(args) > 0 && args[0] == "info" {
					return []byte(tt.info), nil
				}
				return nil, errors.New("Error: No such container: wsl-gpu-hook")
			}
			rep := h.run()
			if tt.status == "" {
				wantNone(t, rep, "rancher desktop")
				return
			}
			want(t, rep, "rancher desktop", tt.status, tt.detail, tt.fix)
			if tt.stale {
				// The spec's own line gives Rancher Desktop's fix too, not install cdi's.
				want(t, rep, "cdi "+spec, Fail, hook+" no longer exists", runScript)
			}
		})
	}
}
