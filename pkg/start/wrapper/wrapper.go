package wrapper

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/devnode"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/atomicfile"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/wsl"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/edits"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/hooklog"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/oci"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/request"
)

// Options is what the wrapper runs with.
type Options struct {
	Config config.Config
	// ConfigPath is passed to the hook it adds when ExplicitConfig is set,
	// so hook and wrapper read the same file.
	ConfigPath     string
	ExplicitConfig bool
	// Self is this binary: the hook the bundle gets, and what the real
	// runtime must not resolve to.
	Self string
	// Stderr hears, in one line, why runc's --log could not take an
	// error (the error itself is the caller's to print, last).
	Stderr io.Writer
}

// Run is the wrapper: it patches the bundle when args create or run a
// container, then replaces this process with the real runtime. It returns
// only on error.
func Run(args []string, o Options) error {
	real, err := RealRuntime(o.Config.Runtime, o.Self)
	if err != nil {
		return err
	}
	cwd, _ := os.Getwd()
	a := ParseArgs(args, cwd)
	if a.Command == "create" || a.Command == "run" {
		if err := PatchBundle(a.Bundle, o); err != nil {
			// Its own line first: the runtime's error stays the last.
			if lerr := WriteLog(a.LogFile, a.LogFormat, "wsl-gpu-hook: runtime: "+oneLine(err.Error()), time.Now()); lerr != nil && o.Stderr != nil {
				fmt.Fprintf(o.Stderr, "%s: runtime: %v\n", wsl.HookName, lerr)
			}
			return err
		}
	}
	argv := append([]string{real}, args...)
	if err := syscall.Exec(real, argv, os.Environ()); err != nil {
		return fmt.Errorf("exec %s: %w", real, err)
	}
	return nil
}

// Args is what the wrapper reads from a runc command line.
type Args struct {
	Command   string // "create", "run", "state", ...; "" if none
	Bundle    string // the command's --bundle, else the working directory
	LogFile   string // the global --log
	LogFormat string // the global --log-format
}

// valueFlags are runc's global flags that take a separate value.
var valueFlags = map[string]bool{
	"--root": true, "--log": true, "--log-format": true, "--criu": true, "--rootless": true,
}

// ParseArgs finds the command, the bundle and the log file in a runc
// command line. The bundle defaults to cwd, the working directory, as in
// runc; only a command has a bundle.
func ParseArgs(args []string, cwd string) Args {
	var a Args
	i := 0
	for ; i < len(args); i++ {
		arg := args[i]
		if !strings.HasPrefix(arg, "-") {
			break
		}
		name, val, hasVal := strings.Cut(arg, "=")
		name = "--" + strings.TrimLeft(name, "-")
		if valueFlags[name] && !hasVal && i+1 < len(args) {
			i++
			val = args[i]
		}
		switch name {
		case "--log":
			a.LogFile = val
		case "--log-format":
			a.LogFormat = val
		}
	}
	if i == len(args) {
		return a
	}
	a.Command = args[i]
	for j := i + 1; j < len(args); j++ {
		arg := args[j]
		switch {
		case arg == "--bundle" || arg == "-b":
			if j+1 < len(args) {
				a.Bundle = args[j+1]
			}
		case strings.HasPrefix(arg, "--bundle="):
			a.Bundle = strings.TrimPrefix(arg, "--bundle=")
		case strings.HasPrefix(arg, "-b="):
			a.Bundle = strings.TrimPrefix(arg, "-b=")
		}
	}
	if a.Bundle == "" {
		a.Bundle = cwd
	}
	return a
}

// RealRuntime resolves the configured runtime name and refuses to resolve
// to self, this binary, which would exec itself forever.
func RealRuntime(name, self string) (string, error) {
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("find the real OCI runtime %q: %w: install runc or set runtime in the config", name, err)
	}
	p, err = filepath.Abs(p)
	if err != nil {
		return "", err
	}
	if evalOrSelf(p) == evalOrSelf(self) {
		return "", fmt.Errorf("the configured runtime %q is this wrapper itself: set runtime in the config to the real runtime (runc)", name)
	}
	return p, nil
}

func evalOrSelf(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// PatchBundle adds the GPU and the prestart hook to the bundle's
// config.json when the container asks for a GPU, and leaves it untouched
// otherwise.
func PatchBundle(bundle string, o Options) error {
	spec, err := oci.LoadSpec(bundle)
	if err != nil {
		return err
	}
	req, err := request.FromSpec(spec, o.Config.RequestEnv, o.Config.RequestAnnotation)
	if err != nil {
		return fmt.Errorf("%w: fix the container's GPU request", err)
	}
	if req.None() {
		return nil
	}
	node, err := devnode.Stat(o.Config.DxgDevice)
	if err != nil {
		return err
	}
	hookArgs := []string{wsl.HookName}
	if o.ExplicitConfig {
		hookArgs = append(hookArgs, "--config", o.ConfigPath)
	}
	e, err := containerEdits(spec, req, node, o, edits.Hook{Stage: "prestart", Path: o.Self, Args: append(hookArgs, "prestart")})
	if err != nil {
		return err
	}

	path := filepath.Join(bundle, "config.json")
	old, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read bundle config: %w", err)
	}
	// What the container sets itself wins: its hook logs nothing for it.
	patched, _, err := e.Patch(old)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := atomicfile.Replace(path, patched); err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	return nil
}

// WriteLog appends msg where containerd's shim and Docker read a runtime's
// errors: runc's --log file, in its format ("json" or text). Without a log
// file it does nothing. The wrapper runs as the engine's user, root for
// most, so the file is opened as the hook's own log is (hooklog.OpenFile):
// a link, or a file others may write, is refused with the reason.
func WriteLog(path, format, msg string, now time.Time) error {
	if path == "" {
		return nil
	}
	f, err := hooklog.OpenFile(path)
	if err != nil {
		return err
	}
	defer f.Close()
	ts := now.Format(time.RFC3339Nano)
	if format == "json" {
		line, _ := json.Marshal(map[string]string{"level": "error", "msg": msg, "time": ts})
		_, err = f.Write(append(line, '\n'))
	} else {
		_, err = fmt.Fprintf(f, "time=%q level=error msg=%q\n", ts, msg)
	}
	if err != nil {
		return fmt.Errorf("write log %s: %w", path, err)
	}
	return nil
}

// oneLine folds a multi-line error (errors.Join) into one log line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}
