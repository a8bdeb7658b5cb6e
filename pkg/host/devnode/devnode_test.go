package devnode

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
)

func TestStat(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, wantErr string
		want                Node
	}{
		// /dev/null is 1:3 on every Linux system.
		{name: "character device", path: "/dev/null", want: Node{Path: "/dev/null", Major: 1, Minor: 3}},
		{name: "missing", path: filepath.Join(dir, "dxg"), wantErr: filepath.Join(dir, "dxg") + " does not exist: " + dxcore.ErrNoDevice.Error()},
		{name: "regular file", path: file, wantErr: file + " is not a character device: point dxg_device in the config at WSL's GPU device"},
		{name: "directory", path: dir, wantErr: "is not a character device"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Stat(tt.path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Stat(%s) error = %v, want %q", tt.path, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Stat(%s) = %+v, %v, want %+v", tt.path, got, err, tt.want)
			}
			if got.String() != "c 1:3" {
				t.Fatalf("String() = %q", got.String())
			}
		})
	}
}
