package version

import "testing"

func TestFormats(t *testing.T) {
	tests := []struct {
		describe              string
		count                 int
		deb, rpm, apk, semver string
	}{
		{"v1.2.3", 0, "1.2.3", "1.2.3", "1.2.3", "1.2.3"},
		{"1.2", 0, "1.2", "1.2", "1.2", "1.2.0"},
		{"v1.2.3-rc1", 0, "1.2.3~rc1", "1.2.3~rc1", "1.2.3_rc1", "1.2.3-rc1"},
		{"v1.2.3-beta.2", 0, "1.2.3~beta.2", "1.2.3~beta.2", "1.2.3_beta2", "1.2.3-beta.2"},
		{"v1.2.3-12-gabcdef0", 0, "1.2.3+12.gabcdef0", "1.2.3^12.gabcdef0", "1.2.3_git12", "1.2.3+12.gabcdef0"},
		{"v1.2.3-rc1-3-gabcdef0", 0, "1.2.3~rc1+3.gabcdef0", "1.2.3~rc1^3.gabcdef0", "1.2.3_rc1_git3", "1.2.3-rc1+3.gabcdef0"},
		{"v1.2.3-12-gabcdef0-dirty", 0, "1.2.3+12.gabcdef0.dirty", "1.2.3^12.gabcdef0.dirty", "1.2.3_git12", "1.2.3+12.gabcdef0.dirty"},
		{"v1.2.3-dirty", 0, "1.2.3+dirty", "1.2.3^dirty", "1.2.3", "1.2.3+dirty"},
		{"19925eb", 560, "0.0.0+560.g19925eb", "0.0.0^560.g19925eb", "0.0.0_git560", "0.0.0+560.g19925eb"},
		{"19925eb-dirty", 560, "0.0.0+560.g19925eb.dirty", "0.0.0^560.g19925eb.dirty", "0.0.0_git560", "0.0.0+560.g19925eb.dirty"},
	}
	for _, tt := range tests {
		t.Run(tt.describe, func(t *testing.T) {
			v, err := Parse(tt.describe, tt.count)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range []struct{ name, got, want string }{
				{"deb", v.Deb(), tt.deb}, {"rpm", v.RPM(), tt.rpm}, {"apk", v.APK(), tt.apk}, {"semver", v.SemVer(), tt.semver},
			} {
				if f.got != f.want {
					t.Errorf("%s: %q, want %q", f.name, f.got, f.want)
				}
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	tests := []struct {
		describe string
		count    int
		want     string
	}{
		{"release-2026", 0, `version "release-2026": tag "release-2026" is not a version (v1.2.3 or v1.2.3-rc1): tag releases that way`},
		{"v1.2.3-rc_1", 0, `version "v1.2.3-rc_1": tag "1.2.3-rc_1" is not a version (v1.2.3 or v1.2.3-rc1): tag releases that way`},
		{"19925eb", 0, `version "19925eb": no tag, and the commit count 0 is not positive: pass git rev-list --count HEAD`},
		{"", 0, `version "": tag "" is not a version (v1.2.3 or v1.2.3-rc1): tag releases that way`},
	}
	for _, tt := range tests {
		t.Run(tt.describe, func(t *testing.T) {
			_, err := Parse(tt.describe, tt.count)
			if err == nil || err.Error() != tt.want {
				t.Errorf("Parse: %v, want %s", err, tt.want)
			}
		})
	}
}
