package devcgroup

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf/asm"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// parseRules reads rules written as rule.String prints them.
func parseRules(t *testing.T, lines ...string) []rule {
	t.Helper()
	var rules []rule
	for _, l := range lines {
		var verb, typ, nums, acc string
		if _, err := fmt.Sscan(l, &verb, &typ, &nums, &acc); err != nil {
			t.Fatalf("rule %q: %v", l, err)
		}
		major, minor, _ := strings.Cut(nums, ":")
		s := specs.LinuxDeviceCgroup{Allow: verb == "allow", Type: typ, Access: acc}
		for _, n := range []struct {
			text string
			dst  **int64
		}{{major, &s.Major}, {minor, &s.Minor}} {
			if n.text != "*" {
				var v int64
				if _, err := fmt.Sscan(n.text, &v); err != nil {
					t.Fatalf("rule %q: %v", l, err)
				}
				*n.dst = &v
			}
		}
		r, err := specRule(s)
		if err != nil {
			t.Fatalf("rule %q: %v", l, err)
		}
		if r.String() != l {
			t.Fatalf("rule %q reads back as %q", l, r)
		}
		rules = append(rules, r)
	}
	return rules
}

func TestReduce(t *testing.T) {
	tests := []struct {
		name        string
		rules       []string
		wantDefault bool
		want        []string
		wantErr     string
	}{
		{
			name: "nothing: deny all",
		},
		{
			name:  "allows merge, sorted by major, minor, type",
			rules: []string{"allow c 10:229 r", "allow c 1:3 rwm", "allow c 10:229 w", "allow b 1:3 m", "allow c 136:* rwm", "allow c *:* m"},
			want:  []string{"allow c *:* m", "allow b 1:3 m", "allow c 1:3 rwm", "allow c 10:229 rw", "allow c 136:* rwm"},
		},
		{
			name:  "a resets, whatever its access",
			rules: []string{"allow c 1:3 rwm", "deny a *:* m", "allow c 1:5 r"},
			want:  []string{"allow c 1:5 r"},
		},
		{
			name:        "allow all, then denies",
			rules:       []string{"allow a *:* rwm", "deny c 1:11 w", "deny b 7:* rwm", "allow c 1:11 rw"},
			wantDefault: true,
			want:        []string{"deny b 7:* rwm"},
		},
		{
			name:  "a deny takes access from the same numbers only",
			rules: []string{"allow c 1:11 rwm", "allow c 1:* r", "deny c 1:11 w", "deny c 1:12 w"},
			want:  []string{"allow c 1:* r", "allow c 1:11 rm"},
		},
		{
			name:    "no hole in a wildcard rule",
			rules:   []string{"allow c 1:* rw", "deny c 1:11 w"},
			wantErr: `rule "deny c 1:11 w" cannot take "w" away from the wider rule "allow c 1:* rw" before it (cgroup v1 cannot punch a hole in a wildcard rule; runc refuses it too)`,
		},
		{
			name:    "no hole in a wildcard major either",
			rules:   []string{"allow a *:* rwm", "deny b *:0 r", "allow b 8:0 rm"},
			wantErr: `rule "allow b 8:0 rm" cannot take "r" away from the wider rule "deny b *:0 r" before it (cgroup v1 cannot punch a hole in a wildcard rule; runc refuses it too)`,
		},
		{
			name:  "another type's wildcard is no wider",
			rules: []string{"allow b 1:* rw", "deny c 1:11 w"},
			want:  []string{"allow b 1:* rw"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			def, exc, err := reduce(parseRules(t, tt.rules...))
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
			for _, r := range exc {
				got = append(got, r.String())
			}
			if def != tt.wantDefault || !slices.Equal(got, tt.want) {
				t.Errorf("default allow %v, exceptions %q; want %v, %q", def, got, tt.wantDefault, tt.want)
			}
		})
	}
}

// TestDeviceProgramEncoding decodes the program's bytes with cilium/ebpf's
// decoder (not ours) and checks the listing: opcodes, registers, offsets
// and jump targets as the kernel will read them.
func TestDeviceProgramEncoding(t *testing.T) {
	p, err := deviceProgram(parseRules(t, "deny a *:* rwm", "allow c 1:3 rwm", "allow c 10:* r", "allow b *:* m"))
	if err != nil {
		t.Fatal(err)
	}
	// cilium's decoder tells the register nibbles' order by comparing the
	// byte order with binary.LittleEndian, so name it rather than
	// NativeEndian.
	var bo binary.ByteOrder = binary.LittleEndian
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		bo = binary.BigEndian
	}
	var insns asm.Instructions
	if err := insns.Unmarshal(bytes.NewReader(encode(p)), bo); err != nil {
		t.Fatal(err)
	}
	want := `
LdXMemW dst: r2 src: r1 off: 0 imm: 0
AndImm32 dst: r2 imm: 65535
LdXMemW dst: r3 src: r1 off: 0 imm: 0
RShImm32 dst: r3 imm: 16
LdXMemW dst: r4 src: r1 off: 4 imm: 0
LdXMemW dst: r5 src: r1 off: 8 imm: 0
JNEImm dst: r2 off: 5 imm: 1
MovReg32 dst: r1 src: r3
AndImm32 dst: r1 imm: 1
JNEReg dst: r1 off: 2 src: r3
MovImm32 dst: r0 imm: 1
Exit
JNEImm dst: r2 off: 4 imm: 2
JNEImm dst: r4 off: 3 imm: 1
JNEImm dst: r5 off: 2 imm: 3
MovImm32 dst: r0 imm: 1
Exit
JNEImm dst: r2 off: 6 imm: 2
MovReg32 dst: r1 src: r3
AndImm32 dst: r1 imm: 2
JNEReg dst: r1 off: 3 src: r3
JNEImm dst: r4 off: 2 imm: 10
MovImm32 dst: r0 imm: 1
Exit
MovImm32 dst: r0 imm: 0
Exit`
	var got strings.Builder
	for _, in := range insns {
		fmt.Fprintf(&got, "\n%v", in)
	}
	if got.String() != want {
		t.Errorf("program:%s\nwant:%s", got.String(), want)
	}
}

// run interprets the subset of eBPF deviceProgram emits, for one device
// access as the kernel's context describes it.
func run(t *testing.T, p []insn, devType, acc, major, minor uint32) bool {
	t.Helper()
	ctx := [3]uint32{devType | acc<<16, major, minor}
	var r [11]uint64
	for pc, steps := 0, 0; ; pc++ {
		if pc < 0 || pc >= len(p) || steps > len(p) {
			t.Fatalf("program runs off its end or loops at pc %d", pc)
		}
		steps++
		in := p[pc]
		switch in.op {
		case opLdxW:
			r[in.dst] = uint64(ctx[in.off/4])
		case opAnd32K:
			r[in.dst] = uint64(uint32(r[in.dst]) & uint32(in.imm))
		case opRsh32K:
			r[in.dst] = uint64(uint32(r[in.dst]) >> in.imm)
		case opMov32K:
			r[in.dst] = uint64(uint32(in.imm))
		case opMov32X:
			r[in.dst] = uint64(uint32(r[in.src]))
		case opJneK:
			if r[in.dst] != uint64(int64(in.imm)) {
				pc += int(in.off)
			}
		case opJneX:
			if r[in.dst] != r[in.src] {
				pc += int(in.off)
			}
		case opExit:
			return r[0] == 1
		default:
			t.Fatalf("unknown opcode %#x at pc %d", in.op, pc)
		}
	}
}

// TestDeviceProgramDecides runs the program on every access to a set of
// devices and checks each answer against the reduced rules read directly:
// an exception decides when its type, numbers (or wildcards) match and it
// names every requested access; otherwise the default does.
func TestDeviceProgramDecides(t *testing.T) {
	sets := [][]string{
		{"deny a *:* rwm", "allow c 1:3 rwm", "allow c 10:* r", "allow b *:* m", "allow c *:5 w", "allow b 7:0 rw"},
		{"allow a *:* rwm", "deny c 1:11 w", "deny b 7:* rwm", "deny c *:229 m", "deny c 4095:1048575 r"},
		parseRulesText(runtimeDefaults()),
	}
	type dev struct {
		typ          byte
		major, minor uint32
	}
	var devs []dev
	for _, typ := range []byte{'b', 'c'} {
		for _, mm := range [][2]uint32{{1, 3}, {1, 5}, {1, 11}, {7, 0}, {10, 5}, {10, 229}, {136, 7}, {5, 2}, {4095, 1048575}, {0, 0}} {
			devs = append(devs, dev{typ, mm[0], mm[1]})
		}
	}
	for i, set := range sets {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			rules := parseRules(t, set...)
			p, err := deviceProgram(rules)
			if err != nil {
				t.Fatal(err)
			}
			def, exc, err := reduce(rules)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range devs {
				for acc := access(1); acc <= accAll; acc++ {
					want := def
					for _, e := range exc {
						if e.typ == d.typ && (e.major == wildcard || e.major == int64(d.major)) &&
							(e.minor == wildcard || e.minor == int64(d.minor)) && acc&^e.access == 0 {
							want = e.allow
							break
						}
					}
					devType := uint32(1) // BPF_DEVCG_DEV_BLOCK
					if d.typ == 'c' {
						devType = 2
					}
					if got := run(t, p, devType, uint32(acc), d.major, d.minor); got != want {
						t.Errorf("%c %d:%d %s: program allows %v, rules %v", d.typ, d.major, d.minor, acc, got, want)
					}
				}
			}
		})
	}
}

func parseRulesText(rules []rule) []string {
	var s []string
	for _, r := range rules {
		s = append(s, r.String())
	}
	return s
}
