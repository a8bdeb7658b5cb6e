package cdiinstall

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// execStart reads back the argv of a unit's ExecStart line as systemd
// splits it, undoing quote: the tests' check that quote is reversible.
func execStart(unit string) ([]string, error) {
	for _, line := range strings.Split(unit, "\n") {
		rest, ok := strings.CutPrefix(line, "ExecStart=")
		if !ok {
			continue
		}
		var argv []string
		for rest = strings.TrimLeft(rest, " "); rest != ""; rest = strings.TrimLeft(rest, " ") {
			if rest[0] != '"' {
				word, tail, _ := strings.Cut(rest, " ")
				argv, rest = append(argv, strings.ReplaceAll(strings.ReplaceAll(word, "%%", "%"), "$$", "$")), tail
				continue
			}
			var b strings.Builder
			i := 1
			for ; i < len(rest) && rest[i] != '"'; i++ {
				switch {
				case rest[i] == '\\' && i+1 < len(rest):
					i++
					switch rest[i] {
					case 'n':
						b.WriteByte('\n')
					case 't':
						b.WriteByte('\t')
					case 'x':
						n, err := strconv.ParseUint(rest[i+1:min(i+3, len(rest))], 16, 8)
						if err != nil {
							return nil, fmt.Errorf("bad \\x escape in ExecStart: %s", line)
						}
						b.WriteByte(byte(n))
						i += 2
					default:
						b.WriteByte(rest[i])
					}
				case (rest[i] == '%' || rest[i] == '$') && i+1 < len(rest) && rest[i+1] == rest[i]:
					i++
					b.WriteByte(rest[i])
				default:
					b.WriteByte(rest[i])
				}
			}
			if i >= len(rest) {
				return nil, fmt.Errorf("unterminated quote in ExecStart: %s", line)
			}
			argv, rest = append(argv, b.String()), rest[i+1:]
		}
		return argv, nil
	}
	return nil, fmt.Errorf("the unit has no ExecStart line")
}

// directives maps each key of a unit file to its values, in order.
func directives(unit string) map[string][]string {
	out := map[string][]string{}
	for _, line := range strings.Split(unit, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			out[k] = append(out[k], v)
		}
	}
	return out
}

// writableDirs are the dirs a unit under ProtectSystem=strict may write:
// its ConfigurationDirectory= (below /etc) and ReadWritePaths=.
func writableDirs(d map[string][]string) []string {
	var out []string
	for _, v := range d["ConfigurationDirectory"] {
		for _, name := range strings.Fields(v) {
			out = append(out, "/etc/"+name)
		}
	}
	for _, v := range d["ReadWritePaths"] {
		for _, p := range strings.Fields(v) {
			out = append(out, strings.TrimLeft(p, "-+"))
		}
	}
	return out
}

// TestUnitSandbox: the system unit is sandboxed read-only but for the
// dir its own ExecStart writes (and a private /tmp, where the conflict
// check copies the CDI dirs), and is ordered before the engines and the
// kubelet without pulling any in (issue 33). The user unit has no
// sandbox and no system ordering.
func TestUnitSandbox(t *testing.T) {
	for _, hook := range []string{"/usr/bin/wsl-gpu-hook", "/opt/wsl gpu/wsl-gpu-hook"} {
		unit := Unit(System(hook, ""))
		d := directives(unit)
		for k, want := range map[string]string{"ProtectSystem": "strict", "PrivateTmp": "yes", "ProtectHome": "yes",
			"NoNewPrivileges": "yes", "CapabilityBoundingSet": "", "DevicePolicy": "closed", "DeviceAllow": "/dev/dxg rw"} {
			if got := d[k]; len(got) != 1 || got[0] != want {
				t.Errorf("%s=%q, want %q", k, got, want)
			}
		}
		argv, err := execStart(unit)
		if err != nil {
			t.Fatal(err)
		}
		if len(argv) < 3 || argv[1] != "cdi" || argv[2] != "generate" {
			t.Fatalf("ExecStart %q", argv)
		}
		flags, err := ParseGenerateArgs(argv[3:])
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(writableDirs(d), flags.Dir) {
			t.Errorf("ExecStart writes %s, the sandbox lets it write only %v", flags.Dir, writableDirs(d))
		}
		before := strings.Fields(strings.Join(d["Before"], " "))
		for _, s := range []string{"docker.service", "containerd.service", "crio.service", "podman.service", "kubelet.service"} {
			if !slices.Contains(before, s) {
				t.Errorf("Before=%v lacks %s", before, s)
			}
		}
		for _, k := range []string{"Wants", "Requires", "Requisite", "BindsTo", "PartOf", "Upholds"} {
			if len(d[k]) > 0 {
				t.Errorf("%s=%v: the unit would start or stop other services", k, d[k])
			}
		}
	}
	u := directives(Unit(User("/home/u/bin/wsl-gpu-hook", "", "/home/u", "", "")))
	for k := range u {
		if !slices.Contains([]string{"Description", "ConditionPathExists", "Type", "ExecStart", "WantedBy"}, k) {
			t.Errorf("user unit has %s=%v", k, u[k])
		}
	}
}

// TestUnitVerifies runs systemd-analyze on the system unit: verify finds
// nothing to say, and security rates its exposure low (9.6 before the
// sandbox).
func TestUnitVerifies(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("systemd-analyze is not installed")
	}
	self, err := os.Executable() // verify wants ExecStart's binary to exist
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), UnitName)
	if err := os.WriteFile(path, []byte(Unit(System(self, ""))), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("systemd-analyze", "verify", path).CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err := exec.Command("systemd-analyze", "security", "--offline=yes", path).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	_, level, ok := strings.Cut(string(out), "Overall exposure level for "+UnitName+": ")
	var exposure float64
	if _, err := fmt.Sscanf(level, "%g", &exposure); !ok || err != nil {
		t.Fatalf("no exposure level in:\n%s", out)
	}
	t.Logf("exposure %.1f", exposure)
	if exposure > 1.5 {
		t.Errorf("exposure %.1f, want at most 1.5:\n%s", exposure, out)
	}
}
