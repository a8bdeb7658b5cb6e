package hookrun

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCDIRefusesForeignRoots: the CDI hook takes a directory for the
// container's root filesystem only when it is one. A runtime that ran the
// hook in a plain directory (youki runs createContainer hooks before it
// prepares the root), in the bundle spelled through a symlink (/var/run ->
// /run), or named the host's / as the root (crun's state under podman
// --rootfs /) gets one line saying so, and the hook changes nothing.
func TestCDIRefusesForeignRoots(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, bundle string) (cwd, stateBundle, stateRoot string)
		wantErr string
	}{
		{
			name: "a plain directory",
			setup: func(t *testing.T, bundle string) (string, string, string) {
				plain := filepath.Join(t.TempDir(), "plain")
				if err := os.Mkdir(plain, 0o755); err != nil {
					t.Fatal(err)
				}
				return plain, bundle, ""
			},
			wantErr: "is not a mount root",
		},
		{
			name: "the bundle through a symlink",
			setup: func(t *testing.T, bundle string) (string, string, string) {
				link := filepath.Join(t.TempDir(), "run")
				if err := os.Symlink(filepath.Dir(bundle), link); err != nil {
					t.Fatal(err)
				}
				return bundle, filepath.Join(link, filepath.Base(bundle)), ""
			},
			wantErr: "is the bundle",
		},
		{
			name: "a state root of /",
			setup: func(t *testing.T, bundle string) (string, string, string) {
				return bundle, bundle, "/"
			},
			wantErr: "the state's root / is the host's root directory",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bundle, _ := bundle(t, "")
			cwd, stBundle, stRoot := tt.setup(t, bundle)
			t.Chdir(cwd)
			st := `{"ociVersion":"1.0.2","id":"c","status":"created","pid":0,"bundle":"` + stBundle + `"`
			if stRoot != "" {
				st += `,"root":"` + stRoot + `"`
			}
			j, err := CDI(strings.NewReader(st+"}"), []string{"vendor:nvidia"})
			if err == nil {
				t.Fatalf("CDI accepted %q as the root filesystem", j.Rootfs)
			}
			if !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "\n") {
				t.Errorf("err = %v, want one line containing %q", err, tt.wantErr)
			}
		})
	}
}
