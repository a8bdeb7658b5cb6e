package doctor

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

func TestDockerDesktop(t *testing.T) {
	const desktopInfo = `{"OperatingSystem":"Docker Desktop","ServerVersion":"29.1.3","CDISpecDirs":["/etc/cdi","/var/run/cdi"],"DockerRootDir":"/var/lib/docker"}`
	tests := []struct {
		name      string
		info      string
		infoErr   error
		inspect   string
		noAgent   bool
		want      string // "" : no docker desktop line at all
		wantFix   string
		wantState Status
	}{
		{name: "no docker CLI", infoErr: exec.ErrNotFound},
		{name: "no engine", infoErr: errors.New("Cannot connect to the Docker daemon")},
		{name: "a dockerd of this distro", info: `{"OperatingSystem":"Debian GNU/Linux 12 (bookworm)","ServerVersion":"20.10.24"}`},
		{name: "Docker Desktop, agent running", info: desktopInfo, inspect: "running cdi-agent",
			wantState: OK, want: "the agent wsl-gpu-hook keeps the CDI specs in Docker Desktop's /var/run/cdi"},
		{name: "Docker Desktop, nothing installed", info: desktopInfo, noAgent: true,
			wantState: Warn, want: "no CDI spec for NVIDIA", wantFix: "wsl-gpu-ctl install docker-desktop"},
		{name: "Docker Desktop, agent exited", info: desktopInfo, inspect: "exited cdi-agent",
			wantState: Fail, want: "the agent container wsl-gpu-hook is exited", wantFix: "docker logs wsl-gpu-hook; wsl-gpu-ctl install docker-desktop"},
		{name: "Docker Desktop, someone else's container", info: desktopInfo, inspect: "running",
			wantState: Warn, want: "that install docker-desktop did not make"},
		{name: "Docker Desktop with CDI off", info: `{"OperatingSystem":"Docker Desktop","ServerVersion":"27.5.1","DockerRootDir":"/var/lib/docker"}`,
			wantState: Fail, want: "Docker Desktop's engine 27.5.1 has CDI off", wantFix: `add "features": {"cdi": true} in Settings > Docker Engine`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			engine := func(cli string, args ...string) ([]byte, error) {
				switch strings.Join(args[:1], " ") {
				case "info":
					return []byte(tt.info), tt.infoErr
				case "container":
					if tt.noAgent {
						return nil, errors.New("Error: No such container: wsl-gpu-hook")
					}
					return []byte(tt.inspect + "\n"), nil
				}
				t.Fatalf("unexpected %s %q", cli, args)
				return nil, nil
			}
			r := &Report{}
			checkDockerDesktop(Options{Engine: engine, Root: t.TempDir()}, r)
			if tt.want == "" {
				if len(r.Results) != 0 {
					t.Fatalf("results %+v, want none", r.Results)
				}
				return
			}
			if len(r.Results) != 1 {
				t.Fatalf("results %+v, want one", r.Results)
			}
			c := r.Results[0]
			if c.Status != tt.wantState || !strings.Contains(c.Detail, tt.want) || !strings.HasPrefix(c.Fix, tt.wantFix) {
				t.Errorf("got %s %q fix %q; want %s %q fix %q", c.Status, c.Detail, c.Fix, tt.wantState, tt.want, tt.wantFix)
			}
		})
	}
}
