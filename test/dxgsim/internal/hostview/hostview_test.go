package hostview

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseSubmounts(t *testing.T) {
	const mountinfo = `24 27 0:6 / /dev rw,relatime - devtmpfs devtmpfs rw
25 24 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw
26 24 0:24 / /dev/pts rw,relatime - devpts devpts rw
29 26 0:26 / /dev/pts rw,relatime - devpts devpts rw
30 26 0:27 / /dev/pts/x rw,relatime - tmpfs tmpfs rw
31 24 0:28 / /dev/pts-extra rw,relatime - tmpfs tmpfs rw
32 24 0:29 / /dev/with\040space rw,relatime - tmpfs tmpfs rw
33 27 0:30 / /devices rw,relatime - tmpfs tmpfs rw
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw
`
	tests := []struct {
		name string
		dir  string
		want []string
	}{
		{"dev", "/dev", []string{"pts", "pts-extra", "shm", "with space"}},
		{"no submounts", "/usr/lib", nil},
		{"nested dir", "/dev/pts", []string{"x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseSubmounts(strings.NewReader(mountinfo), tt.dir)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
