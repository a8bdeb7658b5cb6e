package install

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

func TestContainerdInstallUninstall(t *testing.T) {
	tests := []struct {
		name    string
		fixture string // "" for no config.toml
		plugin  string // where the handler must land
		runc    bool   // the block must add the built-in runc handler
		options map[string]any
	}{
		{name: "containerd 1.6 config default", fixture: "containerd-default.toml", plugin: "io.containerd.grpc.v1.cri"},
		{name: "Debian's shipped config", fixture: "containerd-debian.toml", plugin: "io.containerd.grpc.v1.cri", runc: true},
		{name: "comments, custom settings, SystemdCgroup", fixture: "containerd-custom.toml", plugin: "io.containerd.grpc.v1.cri",
			options: map[string]any{"SystemdCgroup": true}},
		{name: "version 3", fixture: "containerd-v3.toml", plugin: "io.containerd.cri.v1.runtime"},
		{name: "no version key: version 1", fixture: "containerd-v1.toml", plugin: "cri", runc: true},
		{name: "comments only", fixture: "containerd-comments-only.toml", plugin: "io.containerd.grpc.v1.cri", runc: true},
		{name: "no newline at the end", fixture: "containerd-no-newline.toml", plugin: "io.containerd.grpc.v1.cri", runc: true},
		{name: "missing file", plugin: "io.containerd.grpc.v1.cri", runc: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := testOptions(t)
			orig := place(t, o, tt.fixture, containerdCfg)
			run(t, o, Containerd, false)
			got := read(t, o, containerdCfg)

			// The original is untouched: the block is only appended.
			if !bytes.HasPrefix(got, orig) {
				t.Fatalf("the original bytes changed:\n%s", got)
			}
			block := string(got[len(orig):])
			if len(orig) > 0 {
				if !strings.HasPrefix(block, "\n") {
					t.Fatalf("no separating newline before the block:\n%s", got)
				}
				block = block[1:]
			}
			if !strings.HasPrefix(block, blockBegin) || !strings.HasSuffix(block, endLine) {
				t.Fatalf("appended text is not one delimited block:\n%s", block)
			}

			var cfg map[string]any
			if err := toml.Unmarshal(got, &cfg); err != nil {
				t.Fatalf("result does not parse: %v\n%s", err, got)
			}
			runtimes := lookup(cfg, "plugins", tt.plugin, "containerd", "runtimes")
			h := lookup(runtimes, runtimeName)
			if h["runtime_type"] != "io.containerd.runc.v2" || !slices.Equal(h["pod_annotations"].([]any), []any{"wsl-gpu-hook/*"}) {
				t.Errorf("handler = %v", h)
			}
			opts := lookup(h, "options")
			if opts["BinaryName"] != wrapper {
				t.Errorf("BinaryName = %v, want %s", opts["BinaryName"], wrapper)
			}
			for k, v := range tt.options {
				if opts[k] != v {
					t.Errorf("options.%s = %v, want %v copied from runc", k, opts[k], v)
				}
			}
			if _, ok := runtimes["runc"]; !ok {
				t.Error("no runc handler: CRI would lose its default runtime")
			}
			if added := strings.Contains(block, ".runc]"); added != tt.runc {
				t.Errorf("block adds runc: %v, want %v", added, tt.runc)
			}
			if orig != nil {
				if bak := read(t, o, containerdCfg+backupSuffix); !bytes.Equal(bak, orig) {
					t.Errorf("backup = %q, want the original", bak)
				}
				if fi, _ := os.Stat(o.path(containerdCfg)); fi.Mode().Perm() != 0o640 {
					t.Errorf("mode %v, want the original 0640", fi.Mode().Perm())
				}
			}

			if again, err := Containerd(o, false); err != nil || len(again.Changes) != 0 {
				t.Fatalf("second install: %v, %v", again.Changes, err)
			}
			run(t, o, Containerd, true)
			if after := read(t, o, containerdCfg); !bytes.Equal(after, orig) {
				t.Errorf("uninstall left:\n%q\nwant:\n%q", after, orig)
			}
			if orig == nil {
				if _, err := os.Lstat(o.path(containerdCfg)); err == nil {
					t.Error("the file install created is still there")
				}
			}
			if again, err := Containerd(o, true); err != nil || len(again.Changes) != 0 {
				t.Fatalf("second uninstall: %v, %v", again.Changes, err)
			}
		})
	}
}

func TestContainerdBlock(t *testing.T) {
	o := testOptions(t)
	orig := place(t, o, "containerd-custom.toml", containerdCfg)
	o.Annotation = "example.com/gpus"
	p, err := Containerd(o, false)
	if err != nil {
		t.Fatal(err)
	}
	want := string(orig) + `
# BEGIN wsl-gpu-hook (written by ` + "`wsl-gpu-hook install containerd`, removed by `wsl-gpu-hook uninstall containerd`" + `)
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.wsl-gpu]
  runtime_type = "io.containerd.runc.v2"
  pod_annotations = ["wsl-gpu-hook/*", "example.com/gpus"]
  container_annotations = ["wsl-gpu-hook/*", "example.com/gpus"]
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.wsl-gpu.options]
  BinaryName = "/usr/local/bin/wsl-gpu-runtime"
  SystemdCgroup = true
# END wsl-gpu-hook
`
	if len(p.Changes) != 1 || string(p.Changes[0].New) != want {
		t.Fatalf("planned:\n%s\nwant:\n%s", p.Changes[0].New, want)
	}
}

func TestContainerdRefusals(t *testing.T) {
	tests := []struct {
		name      string
		fixture   string
		uninstall bool
		want      string
	}{
		{name: "malformed", fixture: "containerd-malformed.toml",
			want: "/etc/containerd/config.toml:2:9: toml: expected ']' to close table name: fix the file by hand; nothing was changed"},
		{name: "malformed, uninstall", fixture: "containerd-malformed.toml", uninstall: true,
			want: "/etc/containerd/config.toml:2:9: toml: expected ']' to close table name: fix the file by hand; nothing was changed"},
		{name: "handler defined outside the block", fixture: "containerd-taken.toml",
			want: `/etc/containerd/config.toml: [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.wsl-gpu] is already defined outside wsl-gpu-hook's block: remove it to let wsl-gpu-hook manage it, or keep yours and skip this install; nothing was changed`},
		{name: "runtimes as an inline table", fixture: "containerd-inline.toml",
			want: "/etc/containerd/config.toml: with the handler appended the file does not parse (toml: key runtimes already exists as a value): add the wsl-gpu handler by hand where the file defines its runtimes; nothing was changed"},
		{name: "unknown version", fixture: "containerd-version4.toml",
			want: "/etc/containerd/config.toml: version = 4: wsl-gpu-hook knows config versions 1 and 2 (containerd 1.x) and 3 (containerd 2.x): fix the version key; nothing was changed"},
		{name: "block without its end line", fixture: "containerd-unterminated.toml", uninstall: true,
			want: `/etc/containerd/config.toml:3: wsl-gpu-hook's block has no "# END wsl-gpu-hook" line: fix the file by hand; nothing was changed`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := testOptions(t)
			place(t, o, tt.fixture, containerdCfg)
			before := tree(t, o)
			p, err := Containerd(o, tt.uninstall)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("error:\n%v\nwant:\n%s", err, tt.want)
			}
			if p != nil {
				t.Errorf("a plan came with the error: %v", p.Changes)
			}
			if !equalTrees(before, tree(t, o)) {
				t.Error("the tree changed")
			}
		})
	}
}

// Regression: a file holding two blocks (e.g. one pasted by hand) is not
// guessed at.
func TestContainerdTwoBlocks(t *testing.T) {
	o := testOptions(t)
	run(t, o, Containerd, false)
	data := read(t, o, containerdCfg)
	write(t, o, containerdCfg, append(data, data...))
	_, err := Containerd(o, true)
	if want := "/etc/containerd/config.toml:12: a second wsl-gpu-hook block: remove one by hand; nothing was changed"; err == nil || err.Error() != want {
		t.Fatalf("error = %v, want %s", err, want)
	}
}

func TestContainerdWarnsImports(t *testing.T) {
	o := testOptions(t)
	write(t, o, containerdCfg, []byte("version = 2\nimports = [\"/etc/containerd/conf.d/*.toml\"]\n"))
	p, err := Containerd(o, false)
	if err != nil {
		t.Fatal(err)
	}
	if want := "/etc/containerd/config.toml imports other files: a CRI plugin section in one of them replaces this file's, handler included"; len(p.Warnings) != 1 || p.Warnings[0] != want {
		t.Errorf("warnings = %q", p.Warnings)
	}
}

// TestContainerdAcceptsResult has containerd 1.x itself read each
// installed file: the effective configuration must hold the wsl-gpu
// handler and still the runc handler CRI runs pods with by default.
func TestContainerdAcceptsResult(t *testing.T) {
	bin, err := exec.LookPath("containerd")
	if err != nil {
		t.Skip("containerd is not installed")
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil || !strings.Contains(string(out), " 1.") {
		t.Skipf("needs containerd 1.x (config versions 1 and 2): %s", out)
	}
	for _, fixture := range []string{"containerd-default.toml", "containerd-debian.toml", "containerd-custom.toml", "containerd-v1.toml", "containerd-comments-only.toml", ""} {
		t.Run(fixture, func(t *testing.T) {
			o := testOptions(t)
			place(t, o, fixture, containerdCfg)
			run(t, o, Containerd, false)
			cmd := exec.Command(bin, "--config", o.path(containerdCfg), "config", "dump")
			cmd.Dir = filepath.Dir(o.path(containerdCfg))
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("containerd config dump: %v", err)
			}
			var cfg map[string]any
			if err := toml.Unmarshal(out, &cfg); err != nil {
				t.Fatalf("dump does not parse: %v", err)
			}
			cri := lookup(cfg, "plugins", "io.containerd.grpc.v1.cri", "containerd")
			rts := lookup(cri, "runtimes")
			if got := lookup(rts, runtimeName, "options")["BinaryName"]; got != wrapper {
				t.Errorf("effective wsl-gpu BinaryName = %v", got)
			}
			if got := lookup(rts, runtimeName)["pod_annotations"]; !slices.Equal(got.([]any), []any{"wsl-gpu-hook/*"}) {
				t.Errorf("effective pod_annotations = %v", got)
			}
			def, _ := cri["default_runtime_name"].(string)
			if lookup(rts, def)["runtime_type"] != "io.containerd.runc.v2" {
				t.Errorf("the default runtime %q has no handler any more: %v", def, rts)
			}
		})
	}
}

// The shipped config/containerd/config-v{2,3}.toml hold the handler
// install writes for the default paths.
func TestContainerdMatchesShippedFiles(t *testing.T) {
	for version, plugin := range map[int64]string{2: criPlugin[2], 3: criPlugin[3]} {
		shipped, err := os.ReadFile(filepath.Join("../../../config/containerd", fmt.Sprintf("config-v%d.toml", version)))
		if err != nil {
			t.Skipf("shipped file: %v", err)
		}
		block, err := handlerBlock(handler{version: version, plugin: plugin, wrapper: wrapper, annotations: passAnnotations(DefaultAnnotation)})
		if err != nil {
			t.Fatal(err)
		}
		var a, b map[string]any
		if err := toml.Unmarshal(shipped, &a); err != nil {
			t.Fatal(err)
		}
		if err := toml.Unmarshal(block, &b); err != nil {
			t.Fatal(err)
		}
		want, got := lookup(a, "plugins", plugin, "containerd", "runtimes"), lookup(b, "plugins", plugin, "containerd", "runtimes")
		if !reflect.DeepEqual(want, got) {
			t.Errorf("version %d: shipped %v\ninstall writes %v", version, want, got)
		}
	}
}

// TestContainerdUninstallLeavesAnotherInstallsBlock: the block another
// wsl-gpu-hook's install wrote (its wrapper in /usr/bin, seen by a
// /usr/local/bin one) still works: uninstall leaves it, and says so.
func TestContainerdUninstallLeavesAnotherInstallsBlock(t *testing.T) {
	o := testOptions(t)
	theirs := o
	theirs.BinDir, theirs.HookPath = "/usr/bin", "/usr/bin/wsl-gpu-hook"
	run(t, theirs, Containerd, false)
	orig := read(t, o, containerdCfg)
	p, err := Containerd(o, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Changes) != 0 {
		t.Errorf("uninstall by %s changes %v", wrapper, p.Changes)
	}
	want := "/etc/containerd/config.toml: wsl-gpu-hook's block runs /usr/bin/wsl-gpu-runtime, another wsl-gpu-hook's, and stays: uninstall containerd with that one, or remove the block by hand"
	if len(p.Warnings) != 1 || p.Warnings[0] != want {
		t.Errorf("warnings %q, want %q", p.Warnings, want)
	}
	if got := read(t, o, containerdCfg); !bytes.Equal(got, orig) {
		t.Error("config.toml changed")
	}
	// The install that wrote it takes it.
	if p := run(t, theirs, Containerd, true); len(p.Warnings) != 0 {
		t.Errorf("uninstall by the block's own install warns %q", p.Warnings)
	}
}
