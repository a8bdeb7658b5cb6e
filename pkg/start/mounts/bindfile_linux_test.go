package mounts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBindFile binds a host file (librocdxg) read-only onto a file mount
// point, whatever the image has there, never through an image link.
func TestBindFile(t *testing.T) {
	requireRoot(t)
	tests := []struct {
		name    string
		image   []string
		wantErr string
	}{
		{name: "nothing there", image: []string{"dir usr/lib"}},
		{name: "no /usr/lib at all", image: []string{"dir etc"}},
		{name: "the image's own file is hidden", image: []string{"file usr/lib/librocdxg.so.1 image-copy"}},
		{name: "an image link to a host file is replaced, not followed", image: []string{"symlink usr/lib/librocdxg.so.1 OUT/secret"}},
		{name: "a directory in the way", image: []string{"dir usr/lib/librocdxg.so.1"}, wantErr: "the image has a directory at /usr/lib/librocdxg.so.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx := newFixture(t)
			makeTree(t, fx.host, "file opt/rocm/lib/librocdxg.so.1 ELF-rocdxg")
			var image []string
			for _, l := range tt.image {
				image = append(image, strings.ReplaceAll(l, "OUT", fx.outside))
			}
			makeTree(t, fx.rootfs, image...)
			steps := []Step{{Kind: BindFile, Source: filepath.Join(fx.host, "opt/rocm/lib/librocdxg.so.1"), Target: "/usr/lib/librocdxg.so.1"}}
			before := snapshot(t, fx.outside)
			inPrivateMountNS(t, func() {
				err := Apply(fx.rootfs, steps, quietLog())
				target := filepath.Join(fx.rootfs, "usr/lib/librocdxg.so.1")
				if tt.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
						t.Errorf("Apply error = %v, want %q", err, tt.wantErr)
					}
					return
				}
				if err != nil {
					t.Fatalf("Apply: %v", err)
				}
				assertFile(t, target, "ELF-rocdxg")
				opts, ok := mountedAt(target)
				if !ok || !strings.Contains(","+opts+",", ",ro,") || !strings.Contains(opts, "nosuid") || !strings.Contains(opts, "nodev") {
					t.Errorf("%s mounted %q (%v), want ro,nosuid,nodev", target, opts, ok)
				}
				if err := os.WriteFile(target, []byte("x"), 0o644); err == nil {
					t.Error("the bound file is writable")
				}
			})
			if after := snapshot(t, fx.outside); after != before {
				t.Errorf("the host changed outside the rootfs")
			}
		})
	}
}
