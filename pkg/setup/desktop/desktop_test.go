package desktop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	desktop := func(version string, dirs ...string) Engine {
		return Engine{OperatingSystem: OperatingSystem, ServerVersion: version, CDISpecDirs: dirs, DockerRootDir: "/var/lib/docker"}
	}
	tests := []struct {
		name    string
		e       Engine
		want    string // the --cdi-dir asked for
		dir     string
		wantErr string
	}{
		{name: "Docker Desktop 4.42+", e: desktop("28.3.2", "/etc/cdi", "/var/run/cdi"), dir: "/var/run/cdi"},
		{name: "the dir asked for", e: desktop("29.1.0", "/etc/cdi", "/var/run/cdi"), want: "/etc/cdi", dir: "/etc/cdi"},
		{name: "only /etc/cdi read", e: desktop("29.1.0", "/etc/cdi"), dir: "/etc/cdi"},
		{name: "a dir the engine does not read", e: desktop("29.1.0", "/etc/cdi", "/var/run/cdi"), want: "/opt/cdi",
			wantErr: "Docker Desktop's engine reads CDI specs from /etc/cdi, /var/run/cdi, not /opt/cdi: name one of those with --cdi-dir, or leave it out"},
		{name: "engine 24: no CDI", e: desktop("24.0.7"),
			wantErr: "Docker Desktop's engine 24.0.7 has no CDI (it came with engine 25): update Docker Desktop to 4.42 or later (engine 28.2+, CDI on by default)"},
		{name: "engine 27: CDI off by default", e: desktop("27.5.1"),
			wantErr: `Docker Desktop's engine 27.5.1 has CDI off: add "features": {"cdi": true} in Settings > Docker Engine and Apply & restart, or update Docker Desktop to 4.42 or later`},
		{name: "engine 28.1: CDI off by default", e: desktop("28.1.1"), wantErr: "Docker Desktop's engine 28.1.1 has CDI off: "},
		{name: "engine 28.2 with CDI turned off", e: desktop("28.2.2"),
			wantErr: `Docker Desktop's engine 28.2.2 has CDI turned off: remove "cdi": false from "features" in Settings > Docker Engine, then Apply & restart`},
		{name: "an engine in the distro", e: Engine{OperatingSystem: "Ubuntu 24.04.3 LTS", ServerVersion: "29.1.0", CDISpecDirs: []string{"/etc/cdi"}},
			wantErr: `the docker CLI talks to an engine on "Ubuntu 24.04.3 LTS", not Docker Desktop: for a dockerd in this distro run ` + "`sudo wsl-gpu-ctl install cdi`"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, err := tt.e.Check(tt.want)
			if tt.wantErr != "" {
				var de *Error
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) || !errors.As(err, &de) {
					t.Fatalf("Check = %q, %v; want an *Error starting %q", dir, err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("the refusal is not one line: %q", err)
				}
				return
			}
			if err != nil || dir != tt.dir {
				t.Fatalf("Check = %q, %v; want %q", dir, err, tt.dir)
			}
		})
	}
}

func TestParseInfo(t *testing.T) {
	e, err := ParseInfo([]byte(`{"OperatingSystem":"Docker Desktop","ServerVersion":"29.1.3","CDISpecDirs":["/etc/cdi","/var/run/cdi"],"DockerRootDir":"/var/lib/docker","Name":"docker-desktop"}`))
	if err != nil || !e.IsDesktop() || e.HookDir() != "/var/lib/docker/volumes/wsl-gpu-hook/_data" || len(e.CDISpecDirs) != 2 {
		t.Fatalf("ParseInfo = %+v, %v", e, err)
	}
	for _, bad := range []string{"", "Cannot connect to the Docker daemon", `{"ServerVersion":""}`, `{"OperatingSystem":1}`} {
		if _, err := ParseInfo([]byte(bad)); err == nil {
			t.Errorf("ParseInfo(%q) took it", bad)
		}
	}
}

func TestQuote(t *testing.T) {
	got := Quote([]string{"run", "-v", "/usr/lib/wsl:/usr/lib/wsl:ro", "--format", `{{index .Labels "x"}}`, "it's", ""})
	want := `docker run -v /usr/lib/wsl:/usr/lib/wsl:ro --format '{{index .Labels "x"}}' 'it'\''s' ''`
	if got != want {
		t.Errorf("Quote:\n got %s\nwant %s", got, want)
	}
}

// TestInstallCommands pins the commands users may type themselves
// (docs/desktop.md shows them): the agent's least privilege and mounts.
func TestInstallCommands(t *testing.T) {
	o := Options{Image: "localhost/wsl-gpu-hook:v1", CDIDir: "/var/run/cdi", HookDir: "/var/lib/docker/volumes/wsl-gpu-hook/_data"}
	var lines []string
	for _, c := range Install(o) {
		lines = append(lines, Quote(c))
	}
	agent := "--user 0:0 --cap-drop ALL --security-opt no-new-privileges --network none --read-only --tmpfs /run --tmpfs /tmp --device /dev/dxg " +
		"-v /usr/lib/wsl:/usr/lib/wsl:ro -v /var/run/cdi:/var/run/cdi -v wsl-gpu-hook:/var/lib/docker/volumes/wsl-gpu-hook/_data " +
		"--entrypoint /usr/bin/wsl-gpu-ctl localhost/wsl-gpu-hook:v1 cdi keep --hook-dir /var/lib/docker/volumes/wsl-gpu-hook/_data --dir /var/run/cdi"
	want := []string{
		"docker volume create --label dev.wsl-gpu-hook.role=hook wsl-gpu-hook",
		"docker run --rm --label dev.wsl-gpu-hook.role=cdi-agent-once " + agent + " --once",
		"docker run -d --name wsl-gpu-hook --restart always --label dev.wsl-gpu-hook.role=cdi-agent " + agent,
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("Install:\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}

// fakeDocker answers the CLI calls Setup makes from a table of prefixes,
// and records every call.
type fakeDocker struct {
	answers map[string]string // command line prefix -> stdout; "!" prefix: the error
	calls   []string
}

func (f *fakeDocker) run(_ context.Context, args ...string) (string, error) {
	line := strings.Join(args, " ")
	f.calls = append(f.calls, line)
	best := ""
	for p := range f.answers {
		if strings.HasPrefix(line, p) && len(p) > len(best) {
			best = p
		}
	}
	if best == "" {
		return "", fmt.Errorf("no answer for %q", line)
	}
	if a := f.answers[best]; strings.HasPrefix(a, "!") {
		return "", errors.New(a[1:])
	}
	return f.answers[best], nil
}

const info = `{"OperatingSystem":"Docker Desktop","ServerVersion":"29.1.3","CDISpecDirs":["/etc/cdi","/var/run/cdi"],"DockerRootDir":"/var/lib/docker"}`

func TestSetup(t *testing.T) {
	mp := "/var/lib/docker/volumes/wsl-gpu-hook/_data"
	tests := []struct {
		name      string
		uninstall bool
		answers   map[string]string
		wantErr   string
		// wantCalls are the changing calls, in order.
		wantCalls []string
	}{
		{name: "fresh install", answers: map[string]string{
			"info": info, "image inspect": "sha256:1", "container inspect": "!No such container", "volume inspect --format {{index": "!No such volume",
			"volume create": "wsl-gpu-hook", "volume inspect --format {{.Mountpoint}}": mp, "run --rm": "wrote x", "run -d": "id"},
			wantCalls: []string{"volume create", "run --rm", "run -d"}},
		{name: "upgrade replaces our agent", answers: map[string]string{
			"info": info, "image inspect": "sha256:1", "container inspect": RoleAgent, "volume inspect --format {{index": RoleVolume,
			"volume create": "wsl-gpu-hook", "volume inspect --format {{.Mountpoint}}": mp, "rm -f": "", "run --rm": "", "run -d": "id"},
			wantCalls: []string{"volume create", "rm -f", "run --rm", "run -d"}},
		{name: "someone else's container", answers: map[string]string{
			"info": info, "image inspect": "sha256:1", "container inspect": "", "volume inspect": "!No such volume"},
			wantErr: "a container named wsl-gpu-hook exists that install did not make: rename or remove it"},
		{name: "image not loaded", answers: map[string]string{"info": info, "image inspect": "!No such image"},
			wantErr: "the image localhost/wsl-gpu-hook:v1 is not in Docker Desktop's engine: load it first"},
		{name: "no /dev/dxg in the engine", answers: map[string]string{
			"info": info, "image inspect": "sha256:1", "container inspect": "!No such container", "volume inspect --format {{index": "!No such volume",
			"volume create": "wsl-gpu-hook", "volume inspect --format {{.Mountpoint}}": mp,
			"run --rm": `!docker: Error response from daemon: error gathering device information while adding custom device "/dev/dxg": no such file or directory.`},
			wantErr: "Docker Desktop's engine has no /dev/dxg or no /usr/lib/wsl: WSL gives its VM no GPU: check that /dev/dxg exists in your own distro",
			// The refused install takes back what it made.
			wantCalls: []string{"volume create", "run --rm", "run --rm", "volume rm"}},
		{name: "no /usr/lib/wsl in the engine", answers: map[string]string{
			"info": info, "image inspect": "sha256:1", "container inspect": "!No such container", "volume inspect --format {{index": "!No such volume",
			"volume create": "wsl-gpu-hook", "volume inspect --format {{.Mountpoint}}": mp,
			"run --rm": `!docker: Error response from daemon: error while creating mount source path '/usr/lib/wsl': mkdir /usr/lib/wsl: read-only file system.`},
			wantErr:   "Docker Desktop's engine has no /dev/dxg or no /usr/lib/wsl: WSL gives its VM no GPU",
			wantCalls: []string{"volume create", "run --rm", "run --rm", "volume rm"}},
		{name: "no engine", answers: map[string]string{"info": "!Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?"},
			wantErr: "docker info: Cannot connect to the Docker daemon"},
		{name: "uninstall", uninstall: true, answers: map[string]string{
			"info": info, "container inspect --format {{index": RoleAgent, "container inspect --format {{.Config.Image}}": "localhost/wsl-gpu-hook:v0",
			"volume inspect --format {{index": RoleVolume, "volume inspect --format {{.Mountpoint}}": mp, "rm -f": "", "run --rm": "removed x", "volume rm": ""},
			wantCalls: []string{"rm -f", "run --rm", "volume rm"}},
		{name: "uninstall leaves someone else's volume", uninstall: true, answers: map[string]string{
			"info": info, "container inspect": "!No such container", "volume inspect --format {{index": ""},
			wantErr: "the volume wsl-gpu-hook was not made by install"},
		{name: "uninstall with nothing installed", uninstall: true, answers: map[string]string{
			"info": info, "container inspect": "!No such container", "volume inspect": "!No such volume"}},
	}
	changing := []string{"volume create", "volume rm", "rm -f", "run --rm", "run -d"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeDocker{answers: tt.answers}
			var out bytes.Buffer
			s := Setup{Docker: f.run, Image: "localhost/wsl-gpu-hook:v1", Out: &out}
			var err error
			if tt.uninstall {
				err = s.Uninstall(context.Background())
			} else {
				err = s.Install(context.Background())
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatalf("err = %v\n%s", err, out.String())
			}
			var got []string
			for _, c := range f.calls {
				for _, p := range changing {
					if strings.HasPrefix(c, p) {
						got = append(got, p)
						break
					}
				}
			}
			if strings.Join(got, ",") != strings.Join(tt.wantCalls, ",") {
				t.Errorf("changing calls %q, want %q\nall calls:\n%s", got, tt.wantCalls, strings.Join(f.calls, "\n"))
			}
			if tt.uninstall && tt.wantErr == "" && len(tt.wantCalls) > 0 {
				// The agent's own image removes what it wrote.
				for _, c := range f.calls {
					if strings.HasPrefix(c, "run --rm") && !strings.Contains(c, "localhost/wsl-gpu-hook:v0 cdi keep") {
						t.Errorf("remove ran with another image: %s", c)
					}
				}
			}
		})
	}
}
