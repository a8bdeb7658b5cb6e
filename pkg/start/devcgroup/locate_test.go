package devcgroup

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/moby/sys/mountinfo"
)

func TestParseProcCgroup(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		want    membership
		wantErr string
	}{
		{
			name: "hybrid: v1 controllers plus cgroup2",
			file: "cgroup-hybrid",
			want: membership{devices: "/docker/0123abcd", unified: "/docker/0123abcd"},
		},
		{
			name: "pure v2",
			file: "cgroup-v2",
			want: membership{unified: "/system.slice/docker-0123abcd.scope"},
		},
		{
			name: "v1 only, nested path",
			file: "cgroup-v1",
			want: membership{devices: "/kubepods/burstable/pod1/ctr"},
		},
		{
			name: "paths keep spaces and colons, printed unescaped",
			file: "cgroup-spaces",
			want: membership{devices: "/my containers/a:b c", unified: "/my containers/a:b c"},
		},
		{
			name: "outside the cgroup namespace stays as printed",
			file: "cgroup-outside-ns",
			want: membership{devices: "/../../docker/0123abcd", unified: "/../docker/0123abcd"},
		},
		{
			name: "no devices controller, no cgroup2",
			file: "cgroup-no-devices",
			want: membership{},
		},
		{
			name:    "malformed line",
			file:    "cgroup-malformed",
			wantErr: `line 2 "garbage": want hierarchy-ID:controllers:/path`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got, err := parseProcCgroup(f)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestFindMount(t *testing.T) {
	tests := []struct {
		name      string
		mountinfo string
		v2        bool
		cgPath    string
		wantDir   string // "" when no location is expected
		wantRel   string
		wantOK    bool
		wantErr   string
	}{
		{
			name: "hybrid v1 devices", mountinfo: "mountinfo-hybrid", cgPath: "/docker/0123abcd",
			wantDir: "/sys/fs/cgroup/devices/docker/0123abcd", wantRel: "docker/0123abcd", wantOK: true,
		},
		{
			name: "hybrid cgroup2 under unified", mountinfo: "mountinfo-hybrid", v2: true, cgPath: "/docker/0123abcd",
			wantDir: "/sys/fs/cgroup/unified/docker/0123abcd", wantRel: "docker/0123abcd", wantOK: true,
		},
		{
			name: "pure v2 at /sys/fs/cgroup", mountinfo: "mountinfo-v2", v2: true, cgPath: "/system.slice/docker-0123abcd.scope",
			wantDir: "/sys/fs/cgroup/system.slice/docker-0123abcd.scope", wantRel: "system.slice/docker-0123abcd.scope", wantOK: true,
		},
		{
			name: "pure v2 has no devices hierarchy", mountinfo: "mountinfo-v2", cgPath: "/x",
		},
		{
			name: "v1 only has no cgroup2", mountinfo: "mountinfo-v1", v2: true, cgPath: "/",
		},
		{
			name: "root cgroup", mountinfo: "mountinfo-v1", cgPath: "/",
			wantDir: "/sys/fs/cgroup/devices", wantRel: ".", wantOK: true,
		},
		{
			name: "whole-tree mount preferred over sub-cgroup bind, escapes decoded", mountinfo: "mountinfo-nested", cgPath: "/kubepods/pod1/ctr",
			wantDir: "/mnt/all\tcgroups/kubepods/pod1/ctr", wantRel: "kubepods/pod1/ctr", wantOK: true,
		},
		{
			name: "path equal to a mount's root", mountinfo: "mountinfo-nested", v2: true, cgPath: "/kubepods/burstable",
			wantDir: "/mnt/v2 sub", wantRel: ".", wantOK: true,
		},
		{
			name: "path below a mount's root", mountinfo: "mountinfo-nested", v2: true, cgPath: "/kubepods/burstable/pod 1",
			wantDir: "/mnt/v2 sub/pod 1", wantRel: "pod 1", wantOK: true,
		},
		{
			name: "sibling with a common prefix is not below", mountinfo: "mountinfo-nested", v2: true, cgPath: "/kubepods/burstable2/x",
			wantOK:  true,
			wantErr: `cgroup "/kubepods/burstable2/x" is not below the root of any mount of its hierarchy (roots ["/kubepods/burstable"]): run the hook in the host's mount and cgroup namespaces`,
		},
		{
			name: "outside the cgroup namespace", mountinfo: "mountinfo-hybrid", cgPath: "/../../docker/0123abcd",
			wantOK:  true,
			wantErr: `cgroup "/../../docker/0123abcd" lies outside this process's cgroup namespace: run the hook in the host's cgroup namespace`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", tt.mountinfo))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			mounts, err := mountinfo.GetMountsFromReader(f, nil)
			if err != nil {
				t.Fatal(err)
			}
			loc, ok, err := findMount(mounts, tt.v2, tt.cgPath)
			if ok != tt.wantOK {
				t.Errorf("ok = %v, want %v", ok, tt.wantOK)
			}
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantDir == "" {
				if loc.mount != nil {
					t.Fatalf("found %+v, want nothing", loc)
				}
				return
			}
			if loc.mount == nil {
				t.Fatalf("found nothing, want %q", tt.wantDir)
			}
			if got := loc.dir(); got != tt.wantDir || loc.rel != tt.wantRel {
				t.Errorf("dir %q rel %q, want %q rel %q", got, loc.rel, tt.wantDir, tt.wantRel)
			}
			if strings.HasPrefix(loc.rel, "/") {
				t.Errorf("rel %q must be relative for openat2", loc.rel)
			}
		})
	}
}

func FuzzParseProcCgroup(f *testing.F) {
	for _, name := range []string{"cgroup-hybrid", "cgroup-v2", "cgroup-spaces", "cgroup-malformed"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := parseProcCgroup(strings.NewReader(s))
		if err != nil {
			return
		}
		for _, p := range []string{m.devices, m.unified} {
			if p != "" && !strings.HasPrefix(p, "/") {
				t.Errorf("accepted path %q without a leading slash", p)
			}
		}
	})
}

// mountTable is a host's mount table: its own mounts with both cgroup
// hierarchies, then overlays such as a container engine adds, n of them.
func mountTable(n int) string {
	var b strings.Builder
	b.WriteString(`21 26 0:20 / /proc rw,relatime - proc proc rw
26 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw
27 26 0:22 / /sys/fs/cgroup ro,nosuid,nodev,noexec - tmpfs tmpfs ro,mode=755
28 27 0:23 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw,nsdelegate
29 27 0:24 / /sys/fs/cgroup/devices rw,nosuid,nodev,noexec,relatime - cgroup cgroup rw,devices
30 27 0:25 / /sys/fs/cgroup/cpu rw,nosuid,nodev,noexec,relatime - cgroup cgroup rw,cpu,cpuacct
31 26 0:26 / /srv/a\040-\040cgroup\040x rw,relatime - tmpfs tmpfs rw
32 26 0:27 / /srv/cgroup rw,relatime - tmpfs cgroup rw
`)
	for i := range n {
		fmt.Fprintf(&b, "%d 26 0:%d / /var/lib/docker/overlay2/%064x/merged rw,relatime - overlay overlay rw,lowerdir=/var/lib/docker/overlay2/l/ABCDEFGHIJKLMNOPQRSTUVWXYZ,upperdir=/var/lib/docker/overlay2/%064x/diff,workdir=/var/lib/docker/overlay2/%064x/work\n", 1000+i, 100+i, i, i, i)
	}
	return b.String()
}

// TestCgroupMounts: reading only the cgroup lines gives what parsing the
// whole table and keeping its cgroup mounts gives, paths that spell
// " - cgroup " and a tmpfs whose source is "cgroup" included; a line longer
// than the reader's buffer does not split.
func TestCgroupMounts(t *testing.T) {
	long := fmt.Sprintf("40 26 0:40 / /long rw - overlay overlay rw,lowerdir=%s\n", strings.Repeat("/l/x:", 10000))
	longCgroup := fmt.Sprintf("41 27 0:41 /%s /sys/fs/cgroup/devices2 rw - cgroup cgroup rw,devices\n", strings.Repeat("deep/", 5000))
	for _, tt := range []struct {
		name  string
		table string
		want  int // cgroup mounts
	}{
		{"host", mountTable(0), 3},
		{"host with 200 overlays", mountTable(200), 3},
		{"a line longer than the buffer", mountTable(2) + long, 3},
		{"a long cgroup line", mountTable(2) + long + longCgroup, 4},
		{"no newline at the end", strings.TrimSuffix(mountTable(1), "\n"), 3},
		{"no cgroup mounts", "26 1 8:1 / / rw - ext4 /dev/sda1 rw\n", 0},
		{"empty", "", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			want, err := mountinfo.GetMountsFromReader(strings.NewReader(tt.table), mountinfo.FSTypeFilter("cgroup", "cgroup2"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := cgroupMounts(strings.NewReader(tt.table))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tt.want || !reflect.DeepEqual(got, want) {
				t.Errorf("cgroupMounts = %d mounts %+v\nwant %d, the full parse's %+v", len(got), got, tt.want, want)
			}
		})
	}
}

// FuzzCgroupMounts: wherever the whole table parses, reading only its
// cgroup lines gives the same cgroup mounts.
func FuzzCgroupMounts(f *testing.F) {
	f.Add(mountTable(3))
	f.Add("29 27 0:24 / /sys/fs/cgroup/devices rw - cgroup cgroup rw,devices\n")
	f.Add("1 2 3:4 / /a\\040-\\040cgroup\\040 rw - cgroup2 x rw\n")
	f.Fuzz(func(t *testing.T, table string) {
		want, err := mountinfo.GetMountsFromReader(strings.NewReader(table), mountinfo.FSTypeFilter("cgroup", "cgroup2"))
		if err != nil {
			return
		}
		got, err := cgroupMounts(strings.NewReader(table))
		if err != nil {
			t.Fatalf("cgroupMounts: %v, where the full parse succeeds", err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("cgroupMounts = %+v\nfull parse %+v", got, want)
		}
	})
}

// BenchmarkCgroupMounts reads a host's table with n container overlays
// both ways, side by side: the whole table parsed and filtered (as before)
// and only its cgroup lines.
func BenchmarkCgroupMounts(b *testing.B) {
	for _, n := range []int{0, 50, 200} {
		table := mountTable(n)
		b.Run(fmt.Sprintf("overlays=%d/whole", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := mountinfo.GetMountsFromReader(strings.NewReader(table), mountinfo.FSTypeFilter("cgroup", "cgroup2")); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("overlays=%d/cgroup-lines", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := cgroupMounts(strings.NewReader(table)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
