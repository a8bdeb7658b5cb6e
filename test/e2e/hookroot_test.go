package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// shellHook runs h through sh -c script, with args after $0 (the work
// dir): a runtime that prepares the hook's run otherwise than runc does.
func shellHook(h specs.Hook, dir, script string, args ...string) specs.Hook {
	argv := append([]string{"sh", "-c", script, dir}, args...)
	h.Args = append(append(argv, h.Path), h.Args[1:]...)
	h.Path = "/bin/sh"
	return h
}

// TestCDIHookRoot: a CDI device's hook takes a directory for the
// container's root filesystem only when it is one: a mount root (runc and
// crun bind the root filesystem onto itself before they run the
// createContainer hooks), not the bundle, not /. Where a runtime ran it
// anywhere else, the start fails with the hook's one line and nothing is
// written: not in that directory, not on the host (runBox checks the
// host's mount table and WSL paths and that the bundle holds nothing new).
func TestCDIHookRoot(t *testing.T) {
	env(t)
	tests := []struct {
		name string
		// wrap runs the hook as that runtime would; it returns the
		// directories that must be unchanged after the run.
		wrap    func(t *testing.T, h specs.Hook, dir string) (specs.Hook, []string)
		wantErr string
	}{
		{
			// A runtime that does not change into the root filesystem
			// (youki runs createContainer hooks before preparing it): the
			// working directory is a host directory, here one with a
			// glibc loader, so a hook taking it writes the loader files.
			name: "a plain directory",
			wrap: func(t *testing.T, h specs.Hook, dir string) (specs.Hook, []string) {
				plain := filepath.Join(dir, "plain")
				if err := os.MkdirAll(filepath.Join(plain, "lib64"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(plain, "lib64/ld-linux-x86-64.so.2"), []byte("\x7fELF"), 0o755); err != nil {
					t.Fatal(err)
				}
				return shellHook(h, dir, `cd "$0/plain" && exec "$@"`), []string{plain}
			},
			wantErr: "wsl-gpu-hook: cdi-hook: the working directory " + "DIR/plain is not a mount root",
		},
		{
			// A runtime that runs the hook in the bundle and spells the
			// bundle through a symlink (/var/run -> /run) in the state.
			name: "the bundle through a symlink",
			wrap: func(t *testing.T, h specs.Hook, dir string) (specs.Hook, []string) {
				if err := os.Symlink("bundle", filepath.Join(dir, "bundle-link")); err != nil {
					t.Fatal(err)
				}
				script := `cd "$0/bundle" && sed "s|\"bundle\":\"$0/bundle\"|\"bundle\":\"$0/bundle-link\"|" | exec "$@"`
				return shellHook(h, dir, script), nil
			},
			wantErr: "wsl-gpu-hook: cdi-hook: the working directory DIR/bundle is the bundle",
		},
		{
			// crun's state names the root; under podman --rootfs / that
			// is the host's own. The hook runs where /etc and /usr are
			// overlays whose upper layers are in the work dir: whatever
			// it would write on the host lands there instead.
			name: "a state root of /",
			wrap: func(t *testing.T, h specs.Hook, dir string) (specs.Hook, []string) {
				script := `unshare --mount --propagation private sh -c '
					for d in etc usr; do
						mkdir -p "$0/$d.up" "$0/$d.work" &&
						mount -t overlay overlay -o "lowerdir=/$d,upperdir=$0/$d.up,workdir=$0/$d.work" "/$d" || exit 1
					done
					sed "s|^{|{\"root\":\"/\",|" | exec "$@"' "$0" "$@"`
				for _, d := range []string{"etc.up", "usr.up"} {
					if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
						t.Fatal(err)
					}
				}
				return shellHook(h, dir, script), []string{filepath.Join(dir, "etc.up"), filepath.Join(dir, "usr.up")}
			},
			wantErr: "wsl-gpu-hook: cdi-hook: the state's root / is the host's root directory",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			watched := map[string]map[string]string{}
			o := runBox(t, box{
				image: imageDebian, sim: &simulation{profile: "nvidia-laptop"},
				cdi: []string{"nvidia.com/gpu=all"},
				wrapHooks: func(t *testing.T, h specs.Hook, dir string) specs.Hook {
					h, dirs := tt.wrap(t, h, dir)
					for _, d := range dirs {
						tree, err := treeDigest(d)
						if err != nil {
							t.Fatal(err)
						}
						watched[d] = tree
					}
					return h
				},
				checks: []check{{"ran", "echo ran"}},
			})
			got, ok := hookStderr(o.stderr)
			line, rest, _ := strings.Cut(strings.TrimSpace(got), "\n")
			want := strings.ReplaceAll(tt.wantErr, "DIR", o.dir)
			if o.exitCode == 0 || !ok || rest != "" || !strings.HasPrefix(line, want) || !hookLine.MatchString(line) {
				t.Errorf("want a failed start with one hook line starting %q, got exit %d:\n%s", want, o.exitCode, o.debug())
			}
			t.Logf("hook: %s", line)
			for d, before := range watched {
				after, err := treeDigest(d)
				if err != nil {
					t.Fatal(err)
				}
				if diff := diffTrees(before, after); diff != "" {
					t.Errorf("the refused hook changed %s:\n%s", d, diff)
				}
			}
		})
	}
}

// TestCDILegacyHookRoot: the hook of a spec from before selections were
// arguments reads config.json, and takes its root.path for the root
// filesystem once proved, as it proves the working directory: runc bound
// it onto itself, so the container gets its GPU.
func TestCDILegacyHookRoot(t *testing.T) {
	env(t)
	o := runBox(t, box{
		image: imageDebian, sim: &simulation{profile: "nvidia-laptop"},
		cdi: []string{"nvidia.com/gpu=all"}, cdiLegacyHook: true,
		checks: []check{{"dxg", "fsprobe open-rw /dev/dxg"}, {"cuda", "cudaprobe"}},
	})
	o.started(t)
	wantOutput(t, o, "dxg", "open-rw /dev/dxg: ok")
	wantContains(t, o, "cuda", "cuInit(0) = 0")
	if want := "GPU ready in " + o.rootfs; !strings.Contains(o.hookLog, want) {
		t.Errorf("hook log lacks %q:\n%s", want, o.hookLog)
	}
}
