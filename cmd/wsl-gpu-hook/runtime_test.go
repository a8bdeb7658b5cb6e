package main

import "testing"

func TestRuncArgs(t *testing.T) {
	tests := []struct {
		name                     string
		args                     []string
		cmd, bundle, log, logFmt string
	}{
		{
			name: "containerd shim",
			args: []string{"--root", "/run/containerd/runc/k8s.io", "--log", "/run/x/log.json", "--log-format", "json", "create", "--bundle", "/run/b", "--pid-file", "/run/b/init.pid", "c1"},
			cmd:  "create", bundle: "/run/b", log: "/run/x/log.json", logFmt: "json",
		},
		{
			name: "docker style equals",
			args: []string{"--root=/var/run/docker/runtime-runc/moby", "--log=/l", "--log-format=json", "--systemd-cgroup", "create", "--bundle=/b2", "--pid-file", "/p", "--console-socket", "/s", "id"},
			cmd:  "create", bundle: "/b2", log: "/l", logFmt: "json",
		},
		{name: "short bundle flag", args: []string{"run", "-b", "/b3", "-d", "id"}, cmd: "run", bundle: "/b3"},
		{name: "short bundle equals", args: []string{"run", "-b=/b4", "id"}, cmd: "run", bundle: "/b4"},
		{name: "state passes through", args: []string{"--root", "/r", "state", "id"}, cmd: "state"},
		{name: "no command", args: []string{"--version"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd, bundle, log, logFmt := runcArgs(tt.args)
			if tt.bundle == "" && cmd != "" {
				bundle = "" // defaults to the working directory
			}
			if cmd != tt.cmd || bundle != tt.bundle || log != tt.log || logFmt != tt.logFmt {
				t.Fatalf("runcArgs = %q %q %q %q, want %q %q %q %q", cmd, bundle, log, logFmt, tt.cmd, tt.bundle, tt.log, tt.logFmt)
			}
		})
	}
}
