package install

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

func opts(t *testing.T) Options {
	prefix := t.TempDir()
	return Options{Prefix: prefix, BinDir: "/usr/local/bin", HookPath: "/usr/local/bin/wsl-gpu-hook"}
}

// place copies a testdata file to path under the prefix.
func place(t *testing.T, o Options, testdata, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", testdata))
	if err != nil {
		t.Fatal(err)
	}
	full := o.path(path)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, data, 0o640); err != nil {
		t.Fatal(err)
	}
	return data
}

func read(t *testing.T, o Options, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(o.path(path))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

type engine func(Options, bool) (*Plan, error)

func do(t *testing.T, o Options, e engine, uninstall bool) *Plan {
	t.Helper()
	p, err := e(o, uninstall)
	if err != nil {
		t.Fatal(err)
	}
	if err := Apply(o, p); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDockerDaemonJSON(t *testing.T) {
	for _, file := range []string{"daemon-nvidia.json", "daemon-compact.json", "daemon-empty.json", ""} {
		t.Run(file, func(t *testing.T) {
			o := opts(t)
			var orig []byte
			if file != "" {
				orig = place(t, o, file, daemonJSON)
			}
			do(t, o, Docker, false)
			got := read(t, o, daemonJSON)
			var cfg struct {
				Runtimes map[string]struct{ Path string } `json:"runtimes"`
			}
			if err := json.Unmarshal(got, &cfg); err != nil {
				t.Fatalf("result is not JSON: %v\n%s", err, got)
			}
			if cfg.Runtimes["wsl-gpu"].Path != "/usr/local/bin/wsl-gpu-runtime" {
				t.Fatalf("no wsl-gpu runtime:\n%s", got)
			}
			if file == "daemon-nvidia.json" && cfg.Runtimes["nvidia"].Path != "nvidia-container-runtime" {
				t.Fatalf("the nvidia runtime was lost:\n%s", got)
			}
			// Every byte of the original survives: removing the inserted
			// text gives the original back.
			if orig != nil && !containsInOrder(got, orig) {
				t.Fatalf("original bytes changed:\n%s\n---\n%s", orig, got)
			}
			for _, l := range []string{nvidiaHook, wrapperName} {
				if target, err := os.Readlink(o.path("/usr/local/bin/" + l)); err != nil || target != o.HookPath {
					t.Errorf("link %s = %q, %v", l, target, err)
				}
			}
			if orig != nil && !bytes.Equal(read(t, o, daemonJSON+".wsl-gpu-hook.bak"), orig) {
				t.Error("no backup of the original")
			}
			// Installing again changes nothing.
			if p := do(t, o, Docker, false); len(p.Changes) != 0 {
				t.Fatalf("second install planned %v", p.Changes)
			}
			do(t, o, Docker, true)
			if file == "" {
				return
			}
			if after := read(t, o, daemonJSON); !bytes.Equal(after, orig) {
				t.Fatalf("uninstall did not restore the original:\n%q\n%q", orig, after)
			}
			for _, l := range []string{nvidiaHook, wrapperName} {
				if _, err := os.Lstat(o.path("/usr/local/bin/" + l)); err == nil {
					t.Errorf("link %s left after uninstall", l)
				}
			}
		})
	}
}

// containsInOrder reports whether all bytes of sub appear in s in order:
// an insertion left every original byte where it was.
func containsInOrder(s, sub []byte) bool {
	i := 0
	for _, c := range s {
		if i < len(sub) && c == sub[i] {
			i++
		}
	}
	return i == len(sub)
}

func TestDockerRefusals(t *testing.T) {
	t.Run("malformed daemon.json", func(t *testing.T) {
		o := opts(t)
		orig := place(t, o, "daemon-malformed.json", daemonJSON)
		_, err := Docker(o, false)
		if err == nil || !strings.Contains(err.Error(), "/etc/docker/daemon.json:4:1: invalid character '}' looking for beginning of value: fix the file by hand, nothing was changed") {
			t.Fatalf("error = %v", err)
		}
		if !bytes.Equal(read(t, o, daemonJSON), orig) {
			t.Fatal("malformed file changed")
		}
	})
	t.Run("NVIDIA's hook owns the name", func(t *testing.T) {
		o := opts(t)
		os.MkdirAll(o.path("/usr/local/bin"), 0o755)
		os.WriteFile(o.path("/usr/local/bin/"+nvidiaHook), []byte("ELF"), 0o755)
		_, err := Docker(o, false)
		if err == nil || !strings.Contains(err.Error(), "NVIDIA's nvidia-container-toolkit installs it") {
			t.Fatalf("error = %v", err)
		}
		if _, err := os.Lstat(o.path("/usr/local/bin/" + wrapperName)); err == nil {
			t.Fatal("a link was made although the install was refused")
		}
	})
}

func TestContainerd(t *testing.T) {
	for _, file := range []string{"containerd-default.toml", "containerd-custom.toml", "containerd-v3.toml", ""} {
		t.Run(file, func(t *testing.T) {
			o := opts(t)
			var orig []byte
			if file != "" {
				orig = place(t, o, file, containerdCfg)
			}
			do(t, o, Containerd, false)
			got := read(t, o, containerdCfg)
			var cfg map[string]any
			if err := toml.Unmarshal(got, &cfg); err != nil {
				t.Fatalf("result does not parse: %v\n%s", err, got)
			}
			plugin := criPlugin[2]
			if file == "containerd-v3.toml" {
				plugin = criPlugin[3]
			}
			rts := lookup(cfg, "plugins", plugin, "containerd", "runtimes")
			opt, _ := rts["wsl-gpu"].(map[string]any)["options"].(map[string]any)
			if opt["BinaryName"] != "/usr/local/bin/wsl-gpu-runtime" {
				t.Fatalf("handler missing:\n%s", got)
			}
			if _, ok := rts["runc"]; !ok {
				t.Fatalf("runc runtime lost (CRI would fail to start):\n%s", got)
			}
			if orig != nil && !bytes.HasPrefix(got, orig) {
				t.Fatalf("original bytes and comments changed:\n%s", got)
			}
			if p := do(t, o, Containerd, false); len(p.Changes) != 0 {
				t.Fatalf("second install planned %v", p.Changes)
			}
			do(t, o, Containerd, true)
			if orig != nil && !bytes.Equal(read(t, o, containerdCfg), orig) {
				t.Fatalf("uninstall did not restore the original:\n%s", read(t, o, containerdCfg))
			}
		})
	}
}

func TestContainerdRefusals(t *testing.T) {
	tests := []struct{ file, want string }{
		{"containerd-malformed.toml", "/etc/containerd/config.toml:2:9: "},
		{"containerd-v1.toml", "config version 0: only versions 2 (containerd 1.x) and 3 (2.x) are supported"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			o := opts(t)
			orig := place(t, o, tt.file, containerdCfg)
			if _, err := Containerd(o, false); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want %q", err, tt.want)
			}
			if !bytes.Equal(read(t, o, containerdCfg), orig) {
				t.Fatal("file changed")
			}
			if _, err := os.Stat(o.path(containerdCfg + ".wsl-gpu-hook.bak")); err == nil {
				t.Fatal("backup written for a refused file")
			}
		})
	}
}

func TestPodman(t *testing.T) {
	o := opts(t)
	do(t, o, Podman, false)
	var h struct {
		Version string
		Hook    struct{ Path string }
		When    struct{ Annotations map[string]string }
		Stages  []string
	}
	if err := json.Unmarshal(read(t, o, hooksDFile), &h); err != nil {
		t.Fatal(err)
	}
	if h.Version != "1.0.0" || h.Hook.Path != o.HookPath || h.When.Annotations["^wsl-gpu-hook/devices$"] != ".+" || h.Stages[0] != "prestart" {
		t.Fatalf("hooks.d file = %+v", h)
	}
	if p := do(t, o, Podman, false); len(p.Changes) != 0 {
		t.Fatal("second install changed something")
	}
	do(t, o, Podman, true)
	if _, err := os.Stat(o.path(hooksDFile)); err == nil {
		t.Fatal("hooks.d file left after uninstall")
	}
}

func TestDiff(t *testing.T) {
	d := Diff(Change{Path: "/etc/x", Old: []byte("a\nb\n"), New: []byte("a\nc\nb\n")})
	if d != "--- /etc/x\n+++ /etc/x\n a\n+c\n b\n" {
		t.Fatalf("diff:\n%s", d)
	}
}
