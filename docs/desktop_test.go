package docs

import (
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/setup/desktop"
)

// TestDockerDesktopDocs holds the docker lines docs/desktop.md gives users
// without the package to what install docker-desktop runs on Docker
// Desktop (its data root and /var/run/cdi): the volume and the agent.
func TestDockerDesktopDocs(t *testing.T) {
	page := read(t, "docs/desktop.md")
	cmds := desktop.Install(desktop.Options{Image: "IMAGE", CDIDir: "/var/run/cdi", HookDir: "/var/lib/docker/volumes/wsl-gpu-hook/_data"})
	for _, i := range []int{0, 2} {
		if line := desktop.Quote(cmds[i]); !strings.Contains(page, "\n"+line+"\n") {
			t.Errorf("docs/desktop.md lacks the line install docker-desktop runs:\n%s", line)
		}
	}
}
