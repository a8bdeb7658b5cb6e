package install

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// A dry run is a plan that is printed, not applied: planning writes
// nothing, and the diffs show the lines install would add.
func TestDryRunWritesNothing(t *testing.T) {
	tests := []struct {
		name    string
		e       engine
		fixture string
		path    string
		want    []string // lines the diffs must contain
	}{
		{"docker", Docker, "daemon-nvidia.json", daemonJSON, []string{
			"symlink /usr/local/bin/nvidia-container-runtime-hook -> /usr/local/bin/wsl-gpu-hook\n",
			"symlink /usr/local/bin/wsl-gpu-runtime -> /usr/local/bin/wsl-gpu-hook\n",
			"--- /etc/docker/daemon.json\n+++ /etc/docker/daemon.json\n@@ -3,6 +3,9 @@\n",
			"\n+\t\t\"wsl-gpu\": {\n+\t\t\t\"path\": \"/usr/local/bin/wsl-gpu-runtime\"\n+\t\t},\n",
		}},
		{"podman", Podman, "", hooksDFile, []string{
			"--- /dev/null\n+++ /usr/share/containers/oci/hooks.d/wsl-gpu-hook.json\n@@ -0,0 +1,18 @@\n+{\n",
			"\n+    \"path\": \"/usr/local/bin/wsl-gpu-hook\",\n",
		}},
		{"containerd", Containerd, "containerd-custom.toml", containerdCfg, []string{
			"+[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.wsl-gpu.options]\n+  BinaryName = \"/usr/local/bin/wsl-gpu-runtime\"\n",
			"\n # trailing note: nothing below this line\n+\n+# BEGIN wsl-gpu-hook",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := testOptions(t)
			place(t, o, tt.fixture, tt.path)
			before := tree(t, o)
			p, err := tt.e(o, false)
			if err != nil {
				t.Fatal(err)
			}
			var diffs strings.Builder
			for _, c := range p.Changes {
				diffs.WriteString(Diff(c))
			}
			for _, w := range tt.want {
				if !strings.Contains(diffs.String(), w) {
					t.Errorf("diff lacks %q:\n%s", w, diffs.String())
				}
			}
			if !equalTrees(before, tree(t, o)) {
				t.Error("planning wrote something")
			}
		})
	}
}

// Regression: a plan shown by a dry run and applied after the operator
// edited the file must not overwrite the edit.
func TestApplyRefusesStalePlan(t *testing.T) {
	o := testOptions(t)
	place(t, o, "daemon-nvidia.json", daemonJSON)
	p, err := Docker(o, false)
	if err != nil {
		t.Fatal(err)
	}
	edited := []byte("{\"debug\": true}\n")
	write(t, o, daemonJSON, edited)
	err = Apply(o, p)
	want := "/etc/docker/daemon.json changed since it was planned: run the command again; the earlier changes were undone"
	if err == nil || err.Error() != want {
		t.Fatalf("error = %v, want %s", err, want)
	}
	if !bytes.Equal(read(t, o, daemonJSON), edited) {
		t.Error("the edit was overwritten")
	}
	for _, l := range []string{nvidiaHook, wrapperName} {
		if _, err := os.Lstat(o.path("/usr/local/bin/" + l)); err == nil {
			t.Errorf("link %s left although the apply failed", l)
		}
	}
}

func TestApplyUndoesEarlierSteps(t *testing.T) {
	o := testOptions(t)
	orig := place(t, o, "containerd-debian.toml", containerdCfg)
	p := &Plan{Changes: []Change{
		{Path: containerdCfg, Old: orig, New: []byte("version = 2\n")},
		{Path: "/usr/local/bin/x", Link: "/usr/local/bin/wsl-gpu-hook"},
		// A parent that is a file makes this step fail.
		{Path: "/etc/containerd/config.toml/nested", New: []byte("x")},
	}}
	err := Apply(o, p)
	if err == nil || !strings.HasSuffix(err.Error(), "; the earlier changes were undone") {
		t.Fatalf("error = %v", err)
	}
	if !bytes.Equal(read(t, o, containerdCfg), orig) {
		t.Error("the first file was not restored")
	}
	if _, err := os.Lstat(o.path("/usr/local/bin/x")); err == nil {
		t.Error("the link was not removed")
	}
}

// A daemon.json that is a symlink (configuration management keeps the
// real file elsewhere) stays a symlink; the file it points at is edited.
func TestApplyWritesThroughSymlink(t *testing.T) {
	o := testOptions(t)
	orig := place(t, o, "daemon-nested.json", "/srv/config/daemon.json")
	symlink(t, o, "/srv/config/daemon.json", daemonJSON)
	run(t, o, Docker, false)
	if target, err := os.Readlink(o.path(daemonJSON)); err != nil || target != "/srv/config/daemon.json" {
		t.Fatalf("daemon.json is no longer the link: %q, %v", target, err)
	}
	if got := read(t, o, "/srv/config/daemon.json"); !bytes.Contains(got, []byte(`"wsl-gpu"`)) {
		t.Fatalf("the real file was not edited:\n%s", got)
	}
	run(t, o, Docker, true)
	if !bytes.Equal(read(t, o, "/srv/config/daemon.json"), orig) {
		t.Error("uninstall did not restore the real file")
	}
}

func TestChangeString(t *testing.T) {
	tests := []struct {
		c    Change
		want string
	}{
		{Change{Path: "/a", New: []byte("x")}, "create /a"},
		{Change{Path: "/a", Old: []byte("x"), New: []byte("y")}, "update /a (previous content kept in /a.wsl-gpu-hook.bak)"},
		{Change{Path: "/a", Old: []byte("x")}, "remove /a (previous content kept in /a.wsl-gpu-hook.bak)"},
		{Change{Path: "/l", Link: "/t"}, "symlink /l -> /t"},
		{Change{Path: "/l", Link: "/t", Remove: true}, "unlink /l -> /t"},
	}
	for _, tt := range tests {
		if got := tt.c.String(); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.c, got, tt.want)
		}
	}
}
