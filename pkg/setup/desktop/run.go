package desktop

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/wsl"
)

// Docker runs the docker CLI with args and returns its standard output;
// its error reads as the CLI's own first line of standard error.
type Docker func(ctx context.Context, args ...string) (string, error)

// Setup is one install or uninstall against an engine.
type Setup struct {
	Docker Docker
	// Image is the project's image in the engine; CDIDir the spec
	// directory asked for ("" lets Check choose).
	Image, CDIDir string
	// Out receives one line per step, and the commands under DryRun.
	Out    io.Writer
	DryRun bool
}

// engine reads and judges `docker info`.
func (s Setup) engine(ctx context.Context) (Engine, string, error) {
	out, err := s.Docker(ctx, "info", "--format", "{{json .}}")
	if err != nil {
		return Engine{}, "", fmt.Errorf("docker info: %w", err)
	}
	e, err := ParseInfo([]byte(out))
	if err != nil {
		return Engine{}, "", err
	}
	dir, err := e.Check(s.CDIDir)
	return e, dir, err
}

// label is the RoleLabel of a container or volume ("" when it has none),
// and whether it exists at all.
func (s Setup) label(ctx context.Context, object string) (string, bool) {
	labels := ".Labels" // a volume's
	if object == "container" {
		labels = ".Config.Labels"
	}
	out, err := s.Docker(ctx, object, "inspect", "--format", `{{index `+labels+` "`+RoleLabel+`"}}`, Name)
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(out), true
}

// Install sets the agent up in Docker Desktop's engine, replacing an
// older agent of ours (an upgrade); see the package doc.
func (s Setup) Install(ctx context.Context) error {
	e, dir, err := s.engine(ctx)
	if err != nil {
		return err
	}
	if _, err := s.Docker(ctx, "image", "inspect", "--format", "{{.Id}}", s.Image); err != nil {
		return &Error{Msg: fmt.Sprintf("the image %s is not in Docker Desktop's engine", s.Image),
			Fix: "load it first (docker load -i wsl-gpu-hook-image.tar, from the release), or name another with --image"}
	}
	role, hasAgent := s.label(ctx, "container")
	if hasAgent && role != RoleAgent {
		return &Error{Msg: fmt.Sprintf("a container named %s exists that install did not make", Name),
			Fix: "rename or remove it (docker rm), then install again"}
	}
	vrole, hadVolume := s.label(ctx, "volume")
	if hadVolume && vrole != RoleVolume {
		return &Error{Msg: fmt.Sprintf("a volume named %s exists that install did not make", Name),
			Fix: "rename or remove it (docker volume rm), then install again"}
	}
	o := Options{Image: s.Image, CDIDir: dir, HookDir: e.HookDir()}
	if s.DryRun {
		s.print(Install(o))
		return nil
	}
	cmds := Install(o)
	if _, err := s.Docker(ctx, cmds[0]...); err != nil {
		return fmt.Errorf("docker volume create: %w", err)
	}
	// The specs must name the volume where the engine really mounts it.
	mp, err := s.Docker(ctx, "volume", "inspect", "--format", "{{.Mountpoint}}", Name)
	if err != nil {
		return fmt.Errorf("docker volume inspect: %w", err)
	}
	if mp = strings.TrimSpace(mp); mp != o.HookDir {
		o.HookDir = mp
		cmds = Install(o)
	}
	if hasAgent {
		if _, err := s.Docker(ctx, "rm", "-f", Name); err != nil {
			return fmt.Errorf("replace the agent: docker rm: %w", err)
		}
		fmt.Fprintf(s.Out, "docker-desktop: removed the older agent container %s\n", Name)
	}
	out, err := s.Docker(ctx, cmds[1]...)
	if err != nil {
		// A refused install leaves the engine as it was: what the run
		// wrote, and the volume it made, go again.
		if !hadVolume {
			undo := Uninstall(o)
			s.Docker(ctx, undo[0]...)
			s.Docker(ctx, undo[1]...)
		}
		return agentError(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l != "" {
			fmt.Fprintf(s.Out, "docker-desktop: %s\n", l)
		}
	}
	if _, err := s.Docker(ctx, cmds[2]...); err != nil {
		return fmt.Errorf("start the agent: %w", agentError(err))
	}
	fmt.Fprintf(s.Out, "docker-desktop: the agent %s keeps the CDI specs in %s and the hook in the volume %s, at every Docker Desktop start\n", Name, dir, Name)
	return nil
}

// Uninstall removes the agent, what it wrote and its volume. Only what
// install made goes: a same-named container or volume of someone else's is
// refused before anything changes.
func (s Setup) Uninstall(ctx context.Context) error {
	e, dir, err := s.engine(ctx)
	if err != nil {
		return err
	}
	role, hasAgent := s.label(ctx, "container")
	if hasAgent && role != RoleAgent {
		return &Error{Msg: fmt.Sprintf("the container %s was not made by install", Name), Fix: "leave it, or remove it yourself"}
	}
	vrole, hasVolume := s.label(ctx, "volume")
	if hasVolume && vrole != RoleVolume {
		return &Error{Msg: fmt.Sprintf("the volume %s was not made by install", Name), Fix: "leave it, or remove it yourself"}
	}
	o := Options{Image: s.Image, CDIDir: dir, HookDir: e.HookDir()}
	if hasAgent {
		// The agent's own image removes what it wrote: the one installed.
		if img, err := s.Docker(ctx, "container", "inspect", "--format", "{{.Config.Image}}", Name); err == nil {
			o.Image = strings.TrimSpace(img)
		}
	}
	if hasVolume {
		if mp, err := s.Docker(ctx, "volume", "inspect", "--format", "{{.Mountpoint}}", Name); err == nil {
			o.HookDir = strings.TrimSpace(mp)
		}
	}
	cmds := Uninstall(o)
	if s.DryRun {
		if hasAgent {
			s.print([][]string{{"rm", "-f", Name}})
		}
		if hasVolume {
			s.print(cmds)
		}
		return nil
	}
	if !hasAgent && !hasVolume {
		fmt.Fprintln(s.Out, "docker-desktop: nothing to remove")
		return nil
	}
	if hasAgent {
		if _, err := s.Docker(ctx, "rm", "-f", Name); err != nil {
			return fmt.Errorf("docker rm: %w", err)
		}
		fmt.Fprintf(s.Out, "docker-desktop: removed the agent container %s\n", Name)
	}
	if !hasVolume {
		return nil
	}
	out, err := s.Docker(ctx, cmds[0]...)
	if err != nil {
		return fmt.Errorf("remove the specs: %w", agentError(err))
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l != "" {
			fmt.Fprintf(s.Out, "docker-desktop: %s\n", l)
		}
	}
	if _, err := s.Docker(ctx, cmds[1]...); err != nil {
		return fmt.Errorf("docker volume rm: %w", err)
	}
	fmt.Fprintf(s.Out, "docker-desktop: removed the volume %s\n", Name)
	return nil
}

func (s Setup) print(cmds [][]string) {
	for _, c := range cmds {
		fmt.Fprintln(s.Out, Quote(c))
	}
}

// agentError turns what docker run says when the engine has no GPU into
// what to do about it: no /dev/dxg to pass on, or no /usr/lib/wsl to bind
// (docker then tries to make the bind source, which a read-only root
// refuses).
func agentError(err error) error {
	msg := err.Error()
	if strings.Contains(msg, wsl.Device) && strings.Contains(msg, "no such file") || strings.Contains(msg, "'"+wsl.Dir+"'") {
		return &Error{Msg: "Docker Desktop's engine has no /dev/dxg or no /usr/lib/wsl: WSL gives its VM no GPU",
			Fix: "check that /dev/dxg exists in your own distro (if not, WSL's GPU support is off or the Windows GPU driver is missing), run `wsl --update`, then restart Docker Desktop"}
	}
	var de *Error
	if errors.As(err, &de) {
		return err
	}
	// The agent's own line (its stderr, which docker run passes on) says
	// what went wrong; its program name would only repeat ours.
	if rest, ok := strings.CutPrefix(msg, wsl.CtlName+": "); ok {
		return fmt.Errorf("the agent: %s", rest)
	}
	return fmt.Errorf("docker run: %w", err)
}
