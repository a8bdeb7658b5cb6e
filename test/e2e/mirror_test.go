package e2e

import (
	"os"
	"path/filepath"
	"testing"
)

// TestAptMirror guards how the image builder finds the mirror debootstrap
// must use (the only route to Debian's archive on the build machines).
func TestAptMirror(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  string // "" means an error
	}{
		{
			name: "deb822 with comments and a security stanza first",
			files: map[string]string{"sources.list.d/debian.sources": `Types: deb
# http://snapshot.debian.org/archive/debian-security/20250520T000000Z
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main

Types: deb deb-src
URIs: http://mirror.example/debian http://other.example/debian
Suites: bookworm bookworm-updates
Components: main
`},
			want: "http://mirror.example/debian",
		},
		{
			name: "disabled deb822 stanza is skipped",
			files: map[string]string{"sources.list.d/a.sources": `Enabled: no
Types: deb
URIs: http://off.example/debian
Suites: bookworm

Types: deb
URIs: http://on.example/debian
Suites: bookworm
`},
			want: "http://on.example/debian",
		},
		{
			name:  "one-line format with options",
			files: map[string]string{"sources.list": "# deb http://old.example/debian bookworm main\ndeb-src http://src.example/debian bookworm main\ndeb [arch=amd64 signed-by=/k.gpg] http://one.example/debian bookworm main\n"},
			want:  "http://one.example/debian",
		},
		{
			name:  "sources.list wins over sources.list.d",
			files: map[string]string{"sources.list": "deb http://a.example/debian bookworm main\n", "sources.list.d/b.list": "deb http://b.example/debian bookworm main\n"},
			want:  "http://a.example/debian",
		},
		{
			name:  "other suites only",
			files: map[string]string{"sources.list": "deb http://a.example/debian trixie main\n"},
		},
		{name: "no sources at all"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tt.files {
				p := filepath.Join(dir, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := aptMirror(dir, "bookworm")
			if tt.want == "" {
				if err == nil {
					t.Fatalf("aptMirror = %q, want an error", got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("aptMirror = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
