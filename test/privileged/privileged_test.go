package privileged

import (
	"os"
	"strings"
	"testing"
)

func TestSkip(t *testing.T) {
	root := os.Geteuid() == 0
	for _, tc := range []struct {
		env  string
		want string // a substring of the reason, "" for none
	}{
		{env: "", want: "runs only with " + Env + "=1"},
		{env: "0", want: "runs only with " + Env + "=1"},
		{env: "1", want: map[bool]string{true: "", false: "needs root"}[root]},
	} {
		t.Setenv(Env, tc.env)
		got := Skip("mounts things")
		if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("%s=%q: Skip = %q, want %q", Env, tc.env, got, tc.want)
		}
	}
}
