package devcgroup

import (
	"slices"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/devnode"
)

func TestTargetRules(t *testing.T) {
	i64 := func(v int64) *int64 { return &v }
	defaults := []string{
		"allow c *:* m", "allow b *:* m", "allow c 1:3 rwm", "allow c 1:8 rwm", "allow c 1:7 rwm",
		"allow c 5:0 rwm", "allow c 1:5 rwm", "allow c 1:9 rwm", "allow c 136:* rwm", "allow c 5:2 rwm",
		"allow c 10:200 rwm",
	}
	dxg := devnode.Node{Major: 10, Minor: 63}
	tests := []struct {
		name    string
		spec    []specs.LinuxDeviceCgroup
		want    []string // before the defaults
		wantErr string
	}{
		{
			name: "docker default: deny all, then allows, explicit deny of fuse",
			spec: []specs.LinuxDeviceCgroup{
				{Allow: false, Access: "rwm"},
				{Allow: true, Type: "c", Major: i64(1), Minor: i64(3), Access: "rwm"},
				{Allow: false, Type: "c", Major: i64(10), Minor: i64(229), Access: "rwm"},
			},
			want: []string{"deny a *:* rwm", "allow c 1:3 rwm", "deny c 10:229 rwm"},
		},
		{
			name: "missing numbers are wildcards, explicit a",
			spec: []specs.LinuxDeviceCgroup{
				{Allow: true, Type: "b", Major: i64(8), Access: "r"},
				{Allow: false, Type: "a", Access: "m"},
			},
			want: []string{"allow b 8:* r", "deny a *:* m"},
		},
		{
			name: "no spec rules: runtime defaults only",
		},
		{
			name: "every bad rule is reported",
			spec: []specs.LinuxDeviceCgroup{
				{Allow: true, Type: "p", Access: "rwm"},
				{Allow: true, Type: "c", Access: ""},
				{Allow: true, Type: "c", Access: "rx"},
			},
			wantErr: "linux.resources.devices[0]: type \"p\": want \"a\", \"b\" or \"c\"\n" +
				"linux.resources.devices[1]: access \"\": want a combination of r, w and m\n" +
				"linux.resources.devices[2]: access \"rx\": want a combination of r, w and m",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules, err := targetRules(tt.spec, dxg)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range rules {
				got = append(got, r.String())
			}
			want := slices.Concat(tt.want, defaults, []string{"allow c 10:63 rwm"})
			if !slices.Equal(got, want) {
				t.Errorf("rules\n got %q\nwant %q", got, want)
			}
		})
	}
}

func TestDeviceValidate(t *testing.T) {
	tests := []struct {
		dev     devnode.Node
		wantErr string
	}{
		{dev: devnode.Node{Major: 10, Minor: 63}},
		{dev: devnode.Node{Major: 4095, Minor: 1<<20 - 1}},
		{dev: devnode.Node{Major: 4096, Minor: 3}, wantErr: "device c 4096:3: major must be in [0, 4095] and minor in [0, 1048575]"},
		{dev: devnode.Node{Major: 1, Minor: 1 << 20}, wantErr: "device c 1:1048576: major must be in [0, 4095] and minor in [0, 1048575]"},
	}
	for _, tt := range tests {
		t.Run(tt.dev.String(), func(t *testing.T) {
			err := validate(tt.dev)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || err.Error() != tt.wantErr {
				t.Fatalf("error = %v, want %q", err, tt.wantErr)
			}
		})
	}
}
