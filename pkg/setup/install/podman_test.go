package install

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"testing"
)

// hooksFile is the part of oci-hooks(5) schema 1.0.0 that matters here.
type hooksFile struct {
	Version string `json:"version"`
	Hook    struct {
		Path string   `json:"path"`
		Args []string `json:"args"`
	} `json:"hook"`
	When struct {
		Annotations map[string]string `json:"annotations"`
	} `json:"when"`
	Stages []string `json:"stages"`
}

func TestPodmanInstallUninstall(t *testing.T) {
	o := testOptions(t)
	p := run(t, o, Podman, false)
	if len(p.Changes) != 1 || p.Changes[0].Action() != "create" {
		t.Fatalf("plan = %v", p.Changes)
	}
	var h hooksFile
	if err := json.Unmarshal(read(t, o, hooksDFile), &h); err != nil {
		t.Fatal(err)
	}
	if h.Version != "1.0.0" || h.Hook.Path != o.HookPath || !reflect.DeepEqual(h.Hook.Args, []string{"wsl-gpu-hook", "prestart"}) ||
		!reflect.DeepEqual(h.Stages, []string{"prestart"}) {
		t.Errorf("hooks.d file = %+v", h)
	}
	// podman matches each "when" key against every annotation key and the
	// value against its value: only a container asking for GPUs matches.
	for _, c := range []struct {
		key, value string
		match      bool
	}{
		{"wsl-gpu-hook/devices", "all", true},
		{"wsl-gpu-hook/devices", "", false},
		{"xwsl-gpu-hook/devices", "all", false},
		{"wsl-gpu-hook/devicesx", "all", false},
		{"io.podman.annotations.label", "all", false},
	} {
		if got := whenMatches(t, h.When.Annotations, c.key, c.value); got != c.match {
			t.Errorf("annotation %s=%q matches: %v, want %v", c.key, c.value, got, c.match)
		}
	}
	if again, err := Podman(o, false); err != nil || len(again.Changes) != 0 {
		t.Fatalf("second install: %v, %v", again, err)
	}
	run(t, o, Podman, true)
	if _, err := os.Lstat(o.path(hooksDFile)); err == nil {
		t.Error("hooks.d file left after uninstall")
	}
}

func whenMatches(t *testing.T, when map[string]string, key, value string) bool {
	t.Helper()
	for k, v := range when {
		if regexp.MustCompile(k).MatchString(key) && regexp.MustCompile(v).MatchString(value) {
			return true
		}
	}
	return false
}

// The shipped config/podman/wsl-gpu-hook.json says the same as what
// install writes for the default paths.
func TestPodmanMatchesShippedFile(t *testing.T) {
	shipped, err := os.ReadFile("../../../config/podman/wsl-gpu-hook.json")
	if err != nil {
		t.Skipf("shipped file: %v", err)
	}
	var a, b any
	if err := json.Unmarshal(shipped, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(HooksD("/usr/local/bin/wsl-gpu-hook", DefaultAnnotation), &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("config/podman/wsl-gpu-hook.json = %v\ninstall writes %v", a, b)
	}
}

func TestPodmanAnnotationIsQuoted(t *testing.T) {
	var h hooksFile
	if err := json.Unmarshal(HooksD("/h", "gpu.example.com/want"), &h); err != nil {
		t.Fatal(err)
	}
	if !whenMatches(t, h.When.Annotations, "gpu.example.com/want", "all") || whenMatches(t, h.When.Annotations, "gpuXexampleYcom/want", "all") {
		t.Errorf("when = %v: the dots must match only dots", h.When.Annotations)
	}
}

func TestPodmanExistingFiles(t *testing.T) {
	tests := []struct {
		name      string
		existing  string
		uninstall bool
		changes   int
		want      string // error
	}{
		{name: "install over another hook's file of our name", existing: `{"version":"1.0.0","hook":{"path":"/opt/x"},"when":{"always":true},"stages":["prestart"]}`, changes: 1},
		{name: "uninstall leaves another hook's file", existing: `{"version":"1.0.0","hook":{"path":"/opt/x"},"when":{"always":true},"stages":["prestart"]}`, uninstall: true},
		{name: "malformed file refused", existing: `{"version":"1.0.0",`,
			want: "/usr/share/containers/oci/hooks.d/wsl-gpu-hook.json:1:20: unexpected end of JSON input: fix the file by hand; nothing was changed"},
		{name: "malformed file refused by uninstall too", existing: `{"version":"1.0.0",`, uninstall: true,
			want: "/usr/share/containers/oci/hooks.d/wsl-gpu-hook.json:1:20: unexpected end of JSON input: fix the file by hand; nothing was changed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := testOptions(t)
			write(t, o, hooksDFile, []byte(tt.existing))
			p, err := Podman(o, tt.uninstall)
			if tt.want != "" {
				if err == nil || err.Error() != tt.want {
					t.Fatalf("error:\n%v\nwant:\n%s", err, tt.want)
				}
				return
			}
			if err != nil || len(p.Changes) != tt.changes {
				t.Fatalf("plan %v, %v; want %d changes", p, err, tt.changes)
			}
			if err := Apply(o, p); err != nil {
				t.Fatal(err)
			}
			if tt.changes > 0 && !bytes.Equal(read(t, o, hooksDFile+backupSuffix), []byte(tt.existing)) {
				t.Error("the replaced file was not kept")
			}
		})
	}
}

func TestPodmanWarnsAdminMask(t *testing.T) {
	o := testOptions(t)
	write(t, o, hooksDAdmin, []byte("{}"))
	p, err := Podman(o, false)
	if err != nil {
		t.Fatal(err)
	}
	want := "/etc/containers/oci/hooks.d/wsl-gpu-hook.json exists and masks /usr/share/containers/oci/hooks.d/wsl-gpu-hook.json: podman runs the one in /etc"
	if len(p.Warnings) != 1 || p.Warnings[0] != want {
		t.Errorf("warnings = %q", p.Warnings)
	}
}
