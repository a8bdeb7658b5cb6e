package devcgroup

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"

	"golang.org/x/sys/unix"
)

// The device program is generated here rather than by runc's cgroups
// library (github.com/opencontainers/cgroups/devices), whose package links
// cilium/ebpf, godbus, net, crypto and go/parser into the hook: an empty Go
// binary that only imports it starts 1.5 ms slower, on every container
// start. The program is the same, instruction for instruction (a privileged
// test compares the kernel's tags of both), so the semantics are runc's:
// the rules are first reduced as cgroup v1 would hold them, then each
// remaining exception becomes one block of the program.

// reduce applies rules in order to a cgroup that starts denying everything,
// the way cgroup v1's devices controller would, and returns the resulting
// default and its exceptions, sorted by major, minor and type (runc's
// devices emulator and its Rules). A rule of type 'a' resets everything; a
// rule that agrees with the default takes access away from the exception
// with the same numbers, and is refused if a wider exception (a wildcard
// major or minor of the same type) grants some of that access, as cgroup v1
// would silently keep it.
func reduce(rules []rule) (defaultAllow bool, exceptions []rule, err error) {
	type key struct {
		typ          byte
		major, minor int64
	}
	var held map[key]access
	for _, r := range rules {
		if r.typ == 'a' {
			defaultAllow, held = r.allow, nil
			continue
		}
		k := key{r.typ, r.major, r.minor}
		if r.allow != defaultAllow {
			if held == nil {
				held = map[key]access{}
			}
			held[k] |= r.access
			continue
		}
		for _, wider := range []key{{r.typ, wildcard, r.minor}, {r.typ, r.major, wildcard}, {r.typ, wildcard, wildcard}} {
			if wider == k {
				continue
			}
			if overlap := held[wider] & r.access; overlap != 0 {
				w := rule{typ: wider.typ, major: wider.major, minor: wider.minor, access: held[wider], allow: !defaultAllow}
				return false, nil, fmt.Errorf("rule %q cannot take %q away from the wider rule %q before it (cgroup v1 cannot punch a hole in a wildcard rule; runc refuses it too)", r, overlap.String(), w)
			}
		}
		if left := held[k] &^ r.access; left != 0 {
			held[k] = left
		} else {
			delete(held, k)
		}
	}
	for k, a := range held {
		exceptions = append(exceptions, rule{typ: k.typ, major: k.major, minor: k.minor, access: a, allow: !defaultAllow})
	}
	slices.SortFunc(exceptions, func(a, b rule) int {
		return cmp.Or(cmp.Compare(a.major, b.major), cmp.Compare(a.minor, b.minor), cmp.Compare(a.typ, b.typ))
	})
	return defaultAllow, exceptions, nil
}

// insn is one eBPF instruction (struct bpf_insn, include/uapi/linux/bpf.h).
type insn struct {
	op       uint8
	dst, src uint8
	off      int16
	imm      int32
}

// Opcodes the device program uses (include/uapi/linux/bpf_common.h, bpf.h).
const (
	opLdxW     = unix.BPF_LDX | unix.BPF_MEM | unix.BPF_W // dst = *(u32 *)(src + off)
	opAnd32K   = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K // dst = u32(dst & imm)
	opRsh32K   = unix.BPF_ALU | unix.BPF_RSH | unix.BPF_K // dst = u32(dst >> imm)
	opMov32K   = unix.BPF_ALU | unix.BPF_MOV | unix.BPF_K // dst = u32(imm)
	opMov32X   = unix.BPF_ALU | unix.BPF_MOV | unix.BPF_X // dst = u32(src)
	opJneK     = unix.BPF_JMP | unix.BPF_JNE | unix.BPF_K // if dst != imm goto pc+1+off
	opJneX     = unix.BPF_JMP | unix.BPF_JNE | unix.BPF_X // if dst != src goto pc+1+off
	opExit     = unix.BPF_JMP | unix.BPF_EXIT             // return r0
	insnSize   = 8                                        // sizeof(struct bpf_insn)
	maxInsns   = 1 << 20                                  // BPF_COMPLEXITY_LIMIT_INSNS
	regCtx     = 1                                        // r1: struct bpf_cgroup_dev_ctx *
	regType    = 2                                        // r2: device type
	regAccess  = 3                                        // r3: requested access
	regMajor   = 4                                        // r4
	regMinor   = 5                                        // r5
	regRet     = 0                                        // r0: 1 allows, 0 denies
	ctxAccType = 0                                        // offsetof(struct bpf_cgroup_dev_ctx, access_type)
	ctxMajor   = 4                                        // offsetof(..., major)
	ctxMinor   = 8                                        // offsetof(..., minor)
)

// deviceProgram compiles rules to a BPF_PROG_TYPE_CGROUP_DEVICE program, the
// one runc's generator (devices.deviceFilter) makes for them: load the
// device type, requested access, major and minor from the context; then one
// block per exception of reduce, each falling through to the next unless
// everything it names matches; then the default.
func deviceProgram(rules []rule) ([]insn, error) {
	defaultAllow, exceptions, err := reduce(rules)
	if err != nil {
		return nil, err
	}
	p := []insn{
		{op: opLdxW, dst: regType, src: regCtx, off: ctxAccType},
		{op: opAnd32K, dst: regType, imm: 0xffff}, // type: the low 16 bits
		{op: opLdxW, dst: regAccess, src: regCtx, off: ctxAccType},
		{op: opRsh32K, dst: regAccess, imm: 16}, // access: the high 16 bits
		{op: opLdxW, dst: regMajor, src: regCtx, off: ctxMajor},
		{op: opLdxW, dst: regMinor, src: regCtx, off: ctxMinor},
	}
	for _, e := range exceptions {
		devType := int32(unix.BPF_DEVCG_DEV_CHAR)
		if e.typ == 'b' {
			devType = unix.BPF_DEVCG_DEV_BLOCK
		}
		// Each jump skips to the next block: its offset is counted from
		// the instruction after it, and is patched once the block is
		// complete.
		start := len(p)
		p = append(p, insn{op: opJneK, dst: regType, imm: devType})
		if e.access != accAll {
			// Go on unless every requested access is in e.access (r1 is
			// free as a scratch register once the context is read).
			p = append(p,
				insn{op: opMov32X, dst: regCtx, src: regAccess},
				insn{op: opAnd32K, dst: regCtx, imm: int32(e.access)},
				insn{op: opJneX, dst: regCtx, src: regAccess})
		}
		if e.major != wildcard {
			p = append(p, insn{op: opJneK, dst: regMajor, imm: int32(uint32(e.major))})
		}
		if e.minor != wildcard {
			p = append(p, insn{op: opJneK, dst: regMinor, imm: int32(uint32(e.minor))})
		}
		p = append(p, insn{op: opMov32K, dst: regRet, imm: boolImm(e.allow)}, insn{op: opExit})
		next := len(p)
		for i := start; i < next; i++ {
			if p[i].op == opJneK || p[i].op == opJneX {
				p[i].off = int16(next - i - 1)
			}
		}
		if len(p) > maxInsns {
			return nil, fmt.Errorf("%d device rules make a program longer than the kernel takes", len(rules))
		}
	}
	return append(p, insn{op: opMov32K, dst: regRet, imm: boolImm(defaultAllow)}, insn{op: opExit}), nil
}

func boolImm(b bool) int32 {
	if b {
		return 1
	}
	return 0
}

// encode lays the program out as the kernel reads struct bpf_insn in the
// machine's byte order: the register nibbles are a C bit-field, dst first in
// the low bits on little-endian machines, in the high ones on big-endian.
func encode(p []insn) []byte {
	le := binary.NativeEndian.Uint16([]byte{1, 0}) == 1
	b := make([]byte, len(p)*insnSize)
	for i, in := range p {
		o := b[i*insnSize:]
		o[0] = in.op
		if le {
			o[1] = in.dst&0xf | in.src<<4
		} else {
			o[1] = in.dst<<4 | in.src&0xf
		}
		binary.NativeEndian.PutUint16(o[2:], uint16(in.off))
		binary.NativeEndian.PutUint32(o[4:], uint32(in.imm))
	}
	return b
}
