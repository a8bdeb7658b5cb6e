package doctor

import (
	"errors"
	"strings"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/setup/desktop"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/setup/install"
)

// installDesktop is what a Docker Desktop user types.
const installDesktop = "wsl-gpu-ctl install docker-desktop"

// checkDockerDesktop asks the engine the docker CLI on PATH talks to
// whether it is Docker Desktop's, which nothing in this distro reaches:
// then it judges that engine (CDI on) and the agent container install
// docker-desktop runs there. No CLI, no engine, or an engine of this
// distro's (checkDocker's) adds nothing.
func checkDockerDesktop(o Options, r *Report) {
	if o.Engine == nil {
		return
	}
	out, err := o.Engine("docker", "info", "--format", "{{json .}}")
	if err != nil {
		return
	}
	e, err := desktop.ParseInfo(out)
	if err != nil || !e.IsDesktop() {
		return
	}
	if st, err := install.DockerState(o.install()); err == nil && st.HasRuntime {
		r.add("docker desktop", Warn, installDesktop,
			"the docker CLI talks to Docker Desktop, which does not read this distro's %s: install docker here serves a dockerd of this distro only", daemonJSON)
	}
	dir, err := e.Check("")
	var refused *desktop.Error
	if errors.As(err, &refused) {
		r.add("docker desktop", Fail, refused.Fix, "%s", refused.Msg)
		return
	}
	out, err = o.Engine("docker", "container", "inspect", "--format",
		`{{.State.Status}} {{index .Config.Labels "`+desktop.RoleLabel+`"}}`, desktop.Name)
	f := strings.Fields(string(out))
	switch {
	case err != nil || len(f) == 0:
		r.add("docker desktop", Warn, installDesktop,
			"Docker Desktop %s has no GPU for AMD, Intel or Qualcomm and no CDI spec for NVIDIA (--device nvidia.com/gpu=all fails there): the agent is not installed", e.ServerVersion)
	case len(f) < 2 || f[1] != desktop.RoleAgent:
		r.add("docker desktop", Warn, "", "Docker Desktop runs a container named %s that install docker-desktop did not make: rename it, then %s", desktop.Name, installDesktop)
	case f[0] != "running":
		r.add("docker desktop", Fail, "docker logs "+desktop.Name+"; "+installDesktop,
			"the agent container %s is %s: GPU containers by CDI fail with \"unresolvable CDI devices\"", desktop.Name, f[0])
	default:
		r.add("docker desktop", OK, "", "the agent %s keeps the CDI specs in Docker Desktop's %s: docker run --device nvidia.com/gpu=all, amd.com/gpu=all, wsl-gpu-hook.dev/gpu=all", desktop.Name, dir)
	}
}
