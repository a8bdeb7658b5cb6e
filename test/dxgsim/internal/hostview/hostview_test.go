package hostview

import (
	"reflect"
	"strings"
	"testing"

	"github.com/moby/sys/mountinfo"
)

func TestSubmounts(t *testing.T) {
	// The kernel escapes space, tab, newline and backslash in mountpoints
	// as three octal digits (fs/proc_namespace.c, mangle).
	const table = `24 27 0:6 / /dev rw,relatime - devtmpfs devtmpfs rw
25 24 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw
26 24 0:24 / /dev/pts rw,relatime - devpts devpts rw
29 26 0:26 / /dev/pts rw,relatime - devpts devpts rw
30 26 0:27 / /dev/pts/x rw,relatime - tmpfs tmpfs rw
31 24 0:28 / /dev/pts-extra rw,relatime - tmpfs tmpfs rw
32 24 0:29 / /dev/with\040space rw,relatime - tmpfs tmpfs rw
34 24 0:31 / /dev/back\134slash\011tab rw,relatime - tmpfs tmpfs rw
35 34 0:32 / /dev/back\134slash\011tab/in rw,relatime - tmpfs tmpfs rw
33 27 0:30 / /devices rw,relatime - tmpfs tmpfs rw
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw
`
	tests := []struct {
		name string
		dir  string
		want []string
	}{
		{"dev", "/dev", []string{"back\\slash\ttab", "pts", "pts-extra", "shm", "with space"}},
		{"no submounts", "/usr/lib", nil},
		{"nested dir", "/dev/pts", []string{"x"}},
		{"escaped dir", "/dev/back\\slash\ttab", []string{"in"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// What submounts does, from this table instead of the process's.
			mounts, err := mountinfo.GetMountsFromReader(strings.NewReader(table), mountinfo.PrefixFilter(tt.dir))
			if err != nil {
				t.Fatal(err)
			}
			if got := outermost(mounts, tt.dir); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
