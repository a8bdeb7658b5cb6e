package install

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

const wrapper = "/usr/local/bin/wsl-gpu-runtime"

func TestDockerInstallUninstall(t *testing.T) {
	tests := []struct {
		name    string
		fixture string // "" for no daemon.json at all
		// want is the whole installed file when the layout matters;
		// "" checks only the generic properties below.
		want string
		// replaced: the file had a wsl-gpu entry with another path,
		// so install replaces a value instead of inserting.
		replaced bool
		// unchanged: the file already has the entry as wanted.
		unchanged bool
		// restored: uninstall gives the original bytes back.
		restored bool
	}{
		{name: "tabs, nvidia runtime, default-runtime", fixture: "daemon-nvidia.json", restored: true,
			want: "{\n\t\"log-driver\": \"json-file\",\n\t\"log-opts\": {\"max-size\": \"10m\", \"max-file\": \"3\"},\n\t\"default-runtime\": \"runc\",\n\t\"runtimes\": {\n\t\t\"wsl-gpu\": {\n\t\t\t\"path\": \"/usr/local/bin/wsl-gpu-runtime\"\n\t\t},\n\t\t\"nvidia\": {\n\t\t\t\"path\": \"nvidia-container-runtime\",\n\t\t\t\"runtimeArgs\": []\n\t\t}\n\t},\n\t\"features\": { \"buildkit\": true }\n}\n"},
		{name: "compact one-liner", fixture: "daemon-compact.json", restored: true,
			want: `{"runtimes":{"wsl-gpu":{"path":"/usr/local/bin/wsl-gpu-runtime"}},"data-root":"/mnt/docker","dns":["1.1.1.1","8.8.8.8"],   "insecure-registries" : [ "reg.local:5000" ]}` + "\n"},
		{name: "empty object", fixture: "daemon-empty.json", restored: true,
			want: "{\n  \"runtimes\": {\n    \"wsl-gpu\": {\n      \"path\": \"/usr/local/bin/wsl-gpu-runtime\"\n    }\n  }\n}\n"},
		{name: "missing file", fixture: "",
			want: "{\n  \"runtimes\": {\n    \"wsl-gpu\": {\n      \"path\": \"/usr/local/bin/wsl-gpu-runtime\"\n    }\n  }\n}\n"},
		{name: "only whitespace", fixture: "daemon-whitespace.json",
			want: "{\n  \"runtimes\": {\n    \"wsl-gpu\": {\n      \"path\": \"/usr/local/bin/wsl-gpu-runtime\"\n    }\n  }\n}\n"},
		{name: "CRLF line ends", fixture: "daemon-crlf.json", restored: true,
			want: "{\r\n  \"runtimes\": {\r\n    \"wsl-gpu\": {\r\n      \"path\": \"/usr/local/bin/wsl-gpu-runtime\"\r\n    }\r\n  },\r\n  \"debug\": false,\r\n  \"hosts\": [\"unix:///var/run/docker.sock\"],\r\n  \"default-runtime\": \"runc\"\r\n}\r\n"},
		{name: "byte order mark, no final newline", fixture: "daemon-bom.json", restored: true,
			want: "\xef\xbb\xbf" + `{ "runtimes": {"wsl-gpu": {"path": "/usr/local/bin/wsl-gpu-runtime"}}, "debug": true, "experimental" : false }`},
		{name: "four-space indent, nested objects and arrays", fixture: "daemon-nested.json", restored: true},
		{name: "empty runtimes object", fixture: "daemon-runtimes-empty.json",
			want: "{\n  \"log-level\": \"warn\",\n  \"runtimes\": {\n    \"wsl-gpu\": {\n      \"path\": \"/usr/local/bin/wsl-gpu-runtime\"\n    }\n  }\n}\n"},
		{name: "our entry with an old path", fixture: "daemon-ours-stale.json", replaced: true},
		{name: "our entry with runtimeArgs", fixture: "daemon-ours-args.json", unchanged: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := testOptions(t)
			orig := place(t, o, tt.fixture, daemonJSON)
			p := run(t, o, Docker, false)
			got := read(t, o, daemonJSON)

			if tt.want != "" && string(got) != tt.want {
				t.Errorf("installed daemon.json:\n%s\nwant:\n%s", got, tt.want)
			}
			var cfg struct {
				Runtimes       map[string]map[string]any `json:"runtimes"`
				DefaultRuntime *string                   `json:"default-runtime"`
			}
			if err := json.Unmarshal(bytes.TrimPrefix(got, utf8BOM), &cfg); err != nil {
				t.Fatalf("result is not JSON: %v\n%s", err, got)
			}
			if cfg.Runtimes[runtimeName]["path"] != wrapper {
				t.Errorf("runtimes.wsl-gpu = %v, want path %s", cfg.Runtimes[runtimeName], wrapper)
			}
			var before struct {
				Runtimes       map[string]any `json:"runtimes"`
				DefaultRuntime *string        `json:"default-runtime"`
			}
			_ = json.Unmarshal(bytes.TrimPrefix(orig, utf8BOM), &before)
			for name := range before.Runtimes {
				if _, ok := cfg.Runtimes[name]; !ok {
					t.Errorf("runtime %q was lost", name)
				}
			}
			if (before.DefaultRuntime == nil) != (cfg.DefaultRuntime == nil) {
				t.Errorf("default-runtime changed: %v -> %v", before.DefaultRuntime, cfg.DefaultRuntime)
			}

			// Every byte outside our entry is the original's.
			removed, inserted, _ := splitChange(orig, got)
			switch {
			case tt.unchanged:
				if !bytes.Equal(got, orig) {
					t.Errorf("a file that had the entry changed:\n%s", got)
				}
			case tt.replaced:
				if !strings.Contains(removed, "old") || strings.Contains(removed, "nvidia") || strings.Contains(removed, "debug") {
					t.Errorf("replaced %q with %q: more than our entry's value", removed, inserted)
				}
			case len(bytes.TrimSpace(orig)) > 0 && !strings.Contains(tt.fixture, "runtimes-empty"):
				if removed != "" || !strings.Contains(inserted, "wsl-gpu") {
					t.Errorf("install removed %q and inserted %q, want one insertion of our entry", removed, inserted)
				}
			}

			for _, l := range []string{nvidiaHook, wrapperName} {
				if target, err := os.Readlink(o.path("/usr/local/bin/" + l)); err != nil || target != o.HookPath {
					t.Errorf("link %s -> %q (%v), want %s", l, target, err, o.HookPath)
				}
			}
			changedFile := !bytes.Equal(orig, got)
			if bak := read(t, o, daemonJSON+backupSuffix); changedFile && orig != nil && !bytes.Equal(bak, orig) {
				t.Errorf("backup = %q, want the original", bak)
			}
			if fi, err := os.Stat(o.path(daemonJSON)); err == nil && orig != nil && fi.Mode().Perm() != 0o640 {
				t.Errorf("mode %v, want the original 0640", fi.Mode().Perm())
			}
			if n := len(p.Changes); changedFile != (n == 3) {
				t.Errorf("plan had %d changes (%v); daemon.json changed: %v", n, p.Changes, changedFile)
			}

			// A second install has nothing to do.
			if again, err := Docker(o, false); err != nil || len(again.Changes) != 0 {
				t.Fatalf("second install: %v, %v", again.Changes, err)
			}

			run(t, o, Docker, true)
			after := read(t, o, daemonJSON)
			if tt.restored && !bytes.Equal(after, orig) {
				t.Errorf("uninstall did not restore the original:\n%q\nwant:\n%q", after, orig)
			}
			var left struct {
				Runtimes map[string]any `json:"runtimes"`
			}
			if err := json.Unmarshal(bytes.TrimPrefix(after, utf8BOM), &left); err != nil {
				t.Fatalf("after uninstall: %v\n%s", err, after)
			}
			if _, ok := left.Runtimes[runtimeName]; ok {
				t.Errorf("runtime left after uninstall:\n%s", after)
			}
			for _, l := range []string{nvidiaHook, wrapperName} {
				if _, err := os.Lstat(o.path("/usr/local/bin/" + l)); err == nil {
					t.Errorf("link %s left after uninstall", l)
				}
			}
			if again, err := Docker(o, true); err != nil || len(again.Changes) != 0 {
				t.Fatalf("second uninstall: %v, %v", again.Changes, err)
			}
		})
	}
}

// Regression: a refused install must leave the tree exactly as it was: no
// link, no backup, no rewritten file.
func TestDockerRefusals(t *testing.T) {
	tests := []struct {
		name    string
		fixture string
		setup   func(t *testing.T, o Options)
		want    string
	}{
		{name: "malformed daemon.json", fixture: "daemon-malformed.json",
			want: "/etc/docker/daemon.json:4:1: invalid character '}' looking for beginning of value: fix the file by hand; nothing was changed"},
		{name: "top level is an array", fixture: "daemon-array.json",
			want: "/etc/docker/daemon.json: the top level is not a JSON object: fix the file by hand; nothing was changed"},
		{name: "runtimes is a string", fixture: "daemon-runtimes-string.json",
			want: `/etc/docker/daemon.json:2: "runtimes" is a string, not an object: fix the file by hand; nothing was changed`},
		{name: "runtimes given twice", fixture: "daemon-duplicate.json",
			want: `/etc/docker/daemon.json:4: "runtimes" is given twice: keep one and run again; nothing was changed`},
		{name: "runtimes in other letter case", fixture: "daemon-runtimes-case.json",
			want: `/etc/docker/daemon.json:2: "Runtimes" is read as "runtimes": rename it and run again; nothing was changed`},
		{name: "NVIDIA's hook in BinDir", fixture: "daemon-nvidia.json",
			setup: func(t *testing.T, o Options) { write(t, o, "/usr/local/bin/"+nvidiaHook, []byte("\x7fELF")) },
			want:  "/usr/local/bin/nvidia-container-runtime-hook is NVIDIA's nvidia-container-toolkit hook: remove the toolkit or use `wsl-gpu-hook install cdi` instead; nothing was changed"},
		{name: "NVIDIA's hook elsewhere on dockerd's PATH", fixture: "daemon-nvidia.json",
			setup: func(t *testing.T, o Options) { write(t, o, "/usr/bin/"+nvidiaHook, []byte("\x7fELF")) },
			want:  "/usr/bin/nvidia-container-runtime-hook is NVIDIA's nvidia-container-toolkit hook: remove the toolkit or use `wsl-gpu-hook install cdi` instead; nothing was changed"},
		{name: "hook name links to NVIDIA's toolkit",
			setup: func(t *testing.T, o Options) {
				symlink(t, o, "/usr/bin/nvidia-container-toolkit", "/usr/local/bin/"+nvidiaHook)
			},
			want: "/usr/local/bin/nvidia-container-runtime-hook is NVIDIA's nvidia-container-toolkit hook: remove the toolkit or use `wsl-gpu-hook install cdi` instead; nothing was changed"},
		{name: "hook name links to another wsl-gpu-hook",
			setup: func(t *testing.T, o Options) {
				symlink(t, o, "/opt/wsl-gpu-hook/wsl-gpu-hook", "/usr/local/bin/"+nvidiaHook)
			},
			want: "/usr/local/bin/nvidia-container-runtime-hook links to another wsl-gpu-hook (/opt/wsl-gpu-hook/wsl-gpu-hook): uninstall that one first with `/opt/wsl-gpu-hook/wsl-gpu-hook uninstall docker`; nothing was changed"},
		{name: "wrapper name taken and daemon.json malformed: both reported", fixture: "daemon-malformed.json",
			setup: func(t *testing.T, o Options) { write(t, o, "/usr/local/bin/"+wrapperName, []byte("#!/bin/sh\n")) },
			want:  "/usr/local/bin/wsl-gpu-runtime exists and is not a link to wsl-gpu-hook: remove it, or install wsl-gpu-hook into another directory\n/etc/docker/daemon.json:4:1: invalid character '}' looking for beginning of value: fix the file by hand; nothing was changed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := testOptions(t)
			place(t, o, tt.fixture, daemonJSON)
			if tt.setup != nil {
				tt.setup(t, o)
			}
			before := tree(t, o)
			p, err := Docker(o, false)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("error:\n%v\nwant:\n%s", err, tt.want)
			}
			if p != nil {
				t.Errorf("a plan came with the error: %v", p.Changes)
			}
			if after := tree(t, o); !equalTrees(before, after) {
				t.Errorf("the tree changed:\n%v\n->\n%v", before, after)
			}
		})
	}
}

func equalTrees(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestDockerUninstallLeavesOthers(t *testing.T) {
	o := testOptions(t)
	orig := place(t, o, "daemon-nvidia.json", daemonJSON)
	symlink(t, o, "/usr/bin/nvidia-container-toolkit", "/usr/local/bin/"+nvidiaHook)
	write(t, o, "/usr/local/bin/"+wrapperName, []byte("#!/bin/sh\n"))
	before := tree(t, o)
	p, err := Docker(o, true)
	if err != nil || len(p.Changes) != 0 {
		t.Fatalf("uninstall planned %v, %v; want nothing: the links and the file are not ours", p, err)
	}
	if !equalTrees(before, tree(t, o)) || !bytes.Equal(read(t, o, daemonJSON), orig) {
		t.Error("uninstall touched what is not ours")
	}
}

func TestDockerRelativeLinkIsOurs(t *testing.T) {
	o := testOptions(t)
	symlink(t, o, "wsl-gpu-hook", "/usr/local/bin/"+nvidiaHook)
	p, err := Docker(o, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range p.Changes {
		if c.Path == "/usr/local/bin/"+nvidiaHook {
			t.Errorf("planned %v for a link that already points at the hook", c)
		}
	}
	p, err = Docker(o, true)
	if err != nil || len(p.Changes) != 1 || p.Changes[0].Action() != "unlink" {
		t.Fatalf("uninstall plan %v, %v: want the relative link removed", p, err)
	}
}

func TestDockerWarnsBinDirOffPath(t *testing.T) {
	o := testOptions(t)
	o.BinDir, o.HookPath = "/opt/wsl-gpu-hook/bin", "/opt/wsl-gpu-hook/bin/wsl-gpu-hook"
	p, err := Docker(o, false)
	if err != nil {
		t.Fatal(err)
	}
	want := "/opt/wsl-gpu-hook/bin is not on the PATH systemd gives dockerd (/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin): --gpus will not find the hook unless docker.service sets a PATH that includes it"
	if len(p.Warnings) != 1 || p.Warnings[0] != want {
		t.Errorf("warnings = %q", p.Warnings)
	}
	if !strings.Contains(string(p.Changes[2].New), `"/opt/wsl-gpu-hook/bin/wsl-gpu-runtime"`) {
		t.Errorf("daemon.json does not name the wrapper in BinDir:\n%s", p.Changes[2].New)
	}
}

// TestDockerUninstallLeavesAnotherInstallsRuntime: daemon.json's wsl-gpu
// runtime that another wsl-gpu-hook's install wrote (the package's
// /usr/bin wrapper, seen by a /usr/local/bin one) still works: uninstall
// leaves it, and says so.
func TestDockerUninstallLeavesAnotherInstallsRuntime(t *testing.T) {
	o := testOptions(t)
	orig := []byte("{\n  \"runtimes\": {\n    \"wsl-gpu\": {\n      \"path\": \"/usr/bin/wsl-gpu-runtime\"\n    }\n  }\n}\n")
	write(t, o, daemonJSON, orig)
	p, err := Docker(o, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range p.Changes {
		if c.Path == daemonJSON {
			t.Errorf("uninstall by %s changes daemon.json:\n%s", wrapper, c.New)
		}
	}
	want := "/etc/docker/daemon.json: the wsl-gpu runtime runs /usr/bin/wsl-gpu-runtime, another wsl-gpu-hook's, and stays: uninstall docker with that one, or remove it by hand"
	if len(p.Warnings) != 1 || p.Warnings[0] != want {
		t.Errorf("warnings %q, want %q", p.Warnings, want)
	}
}
