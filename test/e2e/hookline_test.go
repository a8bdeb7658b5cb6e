package e2e

import "testing"

// TestHookStderr guards the parsing TestFailingStart relies on, with
// runc's real error output.
func TestHookStderr(t *testing.T) {
	tests := []struct {
		name   string
		stderr string
		want   string
		ok     bool
	}{
		{
			name:   "runc 1.1 logrus error",
			stderr: `time="2026-11-22T09:08:31Z" level=error msg="runc run failed: unable to start container process: error during container init: error running hook #0: error running hook: exit status 1, stdout: , stderr: wsl-gpu-hook: enumerate adapters: no GPU adapter on this host: check the Windows driver\n"` + "\n",
			want:   "wsl-gpu-hook: enumerate adapters: no GPU adapter on this host: check the Windows driver\n",
			ok:     true,
		},
		{
			name:   "two lines from the hook stay two lines",
			stderr: `time="x" level=error msg="error running hook #0: exit status 1, stdout: , stderr: a\nb\n"`,
			want:   "a\nb\n",
			ok:     true,
		},
		{
			name:   "plain text",
			stderr: "error running prestart hook #0: exit status 1, stdout: , stderr: wsl-gpu-hook: x: y: z\n",
			want:   "wsl-gpu-hook: x: y: z\n",
			ok:     true,
		},
		{name: "no hook output", stderr: `time="x" level=error msg="runc run failed: container exists"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := hookStderr(tt.stderr)
			if got != tt.want || ok != tt.ok {
				t.Errorf("hookStderr = %q, %v; want %q, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}
