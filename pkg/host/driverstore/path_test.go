package driverstore

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestFolderName(t *testing.T) {
	tests := []struct {
		name, in, want, err string
	}{
		{name: "SystemRoot", in: `\SystemRoot\System32\DriverStore\FileRepository\nv_dispi.inf_amd64_0123456789abcdef`, want: "nv_dispi.inf_amd64_0123456789abcdef"},
		{name: "drive letter", in: `C:\Windows\System32\DriverStore\FileRepository\nvltwi.inf_amd64_7b2a5c1c4e6f8d90`, want: "nvltwi.inf_amd64_7b2a5c1c4e6f8d90"},
		{name: "long path prefix upper case", in: `\\?\C:\WINDOWS\System32\DriverStore\FileRepository\u0398975.inf_amd64_cab3843582148687`, want: "u0398975.inf_amd64_cab3843582148687"},
		{name: "NT object prefix", in: `\??\C:\Windows\System32\DriverStore\FileRepository\iigd_dch.inf_amd64_ba2ab4a3e0e0b2ea`, want: "iigd_dch.inf_amd64_ba2ab4a3e0e0b2ea"},
		{name: "windows on arm", in: `\SystemRoot\System32\DriverStore\FileRepository\qcdxkmsuc8380.inf_arm64_9a0f6b4e21c3d857`, want: "qcdxkmsuc8380.inf_arm64_9a0f6b4e21c3d857"},
		{name: "case kept", in: `\SystemRoot\System32\DriverStore\filerepository\KIPUDRV.INF_AMD64_5D9E7C7A1B3F2E08`, want: "KIPUDRV.INF_AMD64_5D9E7C7A1B3F2E08"},
		{name: "trailing backslash", in: `C:\Windows\System32\DriverStore\FileRepository\nvami.inf_amd64_0c5f2d19ab7e6634\`, want: "nvami.inf_amd64_0c5f2d19ab7e6634"},
		{name: "subfolder", in: `\SystemRoot\System32\DriverStore\FileRepository\nv_dispi.inf_amd64_1\lib`, want: "nv_dispi.inf_amd64_1/lib"},
		{name: "first FileRepository wins", in: `\FileRepository\a.inf_amd64_1\FileRepository\b`, want: "a.inf_amd64_1/FileRepository/b"},
		{name: "non-ASCII kept", in: `\SystemRoot\FileRepository\ünï.inf_amd64_1`, want: "ünï.inf_amd64_1"},

		{name: "empty", in: ``, err: `empty driver store path`},
		{name: "no FileRepository", in: `C:\Windows\System32\drivers\nvlddmkm.sys`, err: `driver store path "C:\\Windows\\System32\\drivers\\nvlddmkm.sys" has no \FileRepository\ component`},
		{name: "forward slashes only", in: `C:/Windows/System32/DriverStore/FileRepository/nv_dispi.inf_amd64_1`, err: `has no \FileRepository\ component`},
		{name: "no leading separator", in: `FileRepository\nv_dispi.inf_amd64_1`, err: `has no \FileRepository\ component`},
		{name: "FileRepository only", in: `C:\Windows\System32\DriverStore\FileRepository\`, err: `names no folder after \FileRepository\`},
		{name: "absolute after FileRepository", in: `\SystemRoot\FileRepository\\etc`, err: `has an empty component after \FileRepository\`},
		{name: "slash absolute", in: `\SystemRoot\FileRepository\/etc`, err: `has an empty component after \FileRepository\`},
		{name: "double separator", in: `\SystemRoot\FileRepository\a\\b`, err: `has an empty component after \FileRepository\`},
		{name: "dot dot", in: `\SystemRoot\FileRepository\..`, err: `component ".." contains ".."`},
		{name: "dot dot climbing", in: `\SystemRoot\FileRepository\nv.inf_amd64_1\..\..\..\etc`, err: `component ".." contains ".."`},
		{name: "dot dot with slash", in: `\SystemRoot\FileRepository\x/../../etc`, err: `component ".." contains ".."`},
		{name: "dot dot inside a name", in: `\SystemRoot\FileRepository\a..b`, err: `component "a..b" contains ".."`},
		{name: "dot", in: `\SystemRoot\FileRepository\.`, err: `component "." is not a folder`},
		{name: "dot then name", in: `\SystemRoot\FileRepository\.\nv.inf_amd64_1`, err: `component "." is not a folder`},
		{name: "NUL", in: "\\SystemRoot\\FileRepository\\nv\x00.inf_amd64_1", err: `contains control character U+0000`},
		{name: "newline", in: "\\SystemRoot\\FileRepository\\nv\n.inf_amd64_1", err: `contains control character U+000A`},
		{name: "DEL", in: "\\SystemRoot\\FileRepository\\nv\x7f", err: `contains control character U+007F`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FolderName(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("FolderName(%q) = %q, %v; want error containing %q", tt.in, got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("FolderName(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

// TestFolderNameErrorWhole pins one whole message users read.
func TestFolderNameErrorWhole(t *testing.T) {
	_, err := FolderName(`\SystemRoot\FileRepository\..\..\etc`)
	const want = `driver store path "\\SystemRoot\\FileRepository\\..\\..\\etc": component ".." contains ".."`
	if err == nil || err.Error() != want {
		t.Fatalf("error %v\nwant %s", err, want)
	}
}

func FuzzFolderName(f *testing.F) {
	for _, s := range []string{
		`\SystemRoot\System32\DriverStore\FileRepository\nv_dispi.inf_amd64_0123456789abcdef`,
		`\\?\C:\WINDOWS\System32\DriverStore\FileRepository\u0398975.inf_amd64_cab3843582148687`,
		`\??\C:\Windows\System32\DriverStore\FILEREPOSITORY\x\y\`,
		`\FileRepository\..\..`, `\FileRepository\/`, `\FileRepository\a/./b`, "\\FileRepository\\\x00", `\FILErepository\\`,
	} {
		f.Add(s)
	}
	const drivers = "/usr/lib/wsl/drivers"
	f.Fuzz(func(t *testing.T, in string) {
		got, err := FolderName(in)
		if err != nil {
			if got != "" {
				t.Fatalf("FolderName(%q) = %q with error %v", in, got, err)
			}
			return
		}
		if got == "" || !filepath.IsLocal(got) || filepath.Clean(got) != got || strings.ContainsAny(got, "\\\x00") {
			t.Fatalf("FolderName(%q) = %q: not a clean local path", in, got)
		}
		joined := filepath.Join(drivers, got)
		rel, err := filepath.Rel(drivers, joined)
		if err != nil || rel != got || rel == ".." || strings.HasPrefix(rel, "../") {
			t.Fatalf("FolderName(%q) = %q leaves %s: joined %s, rel %q (%v)", in, got, drivers, joined, rel, err)
		}
	})
}
