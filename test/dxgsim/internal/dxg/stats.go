package dxg

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/simhost"
)

// Statistics calls (issue #24). Layouts: the WSL kernel's
// include/uapi/misc/d3dkmthk.h for the wire structs, the Windows SDK
// d3dkmthk.h for the result union the host fills.
const (
	LX_DXQUERYVIDEOMEMORYINFO = 0xC038470A // struct d3dkmt_queryvideomemoryinfo, 56 bytes
	LX_DXQUERYSTATISTICS      = 0xC3284743 // struct d3dkmt_querystatistics, 0x328 bytes

	sizeQueryStatistics = 0x328
	sizeQueryVidMemInfo = 56
	statsResultAt       = 24
	statsQueryAt        = 0x320
	sizeNodeMetadata    = 0x4e
	qaiNodeMetadata     = 25

	qsAdapter             = 0
	qsSegment             = 3
	qsNode                = 5
	qsProcessSegmentGroup = 9
)

// statsClock is the model's time: since the kernel started, unless the
// config gives a clock a test steps.
func (k *Kernel) statsClock() time.Duration {
	if k.cfg.Clock != nil {
		return k.cfg.Clock()
	}
	return time.Since(k.started)
}

// load returns the modelled load of adapter i.
func (k *Kernel) load(i int) simhost.AdapterLoad { return k.host.load.Adapters[i] }

func (k *Kernel) adapterByLUID(low, high uint32) int { return k.host.byLUID(low, high) }

// commOf returns the command name of the dxg process whose pid is pid, as
// dxgkrnl's find_dxgprocess_handle looks it up: by the pid the process had
// in its own pid namespace (a container's process by its in-container
// pid), the first match.
func (k *Kernel) commOf(pid uint64) (string, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, pr := range k.procs {
		if pr.nspid == pid {
			return pr.comm, true
		}
	}
	return "", false
}

// nsPID is tgid's pid in its innermost pid namespace (the last NSpid
// field of /proc/TGID/status, read in the simulator's own, the root
// namespace); tgid when that cannot be read.
func nsPID(tgid int) uint64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(tgid) + "/status")
	if err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if rest, ok := strings.CutPrefix(l, "NSpid:"); ok {
				f := strings.Fields(rest)
				if n, err := strconv.ParseUint(f[len(f)-1], 10, 64); err == nil && len(f) > 0 {
					return n
				}
			}
		}
	}
	return uint64(tgid)
}

// processUsage is the model's memory use of the process named comm.
func processUsage(l simhost.AdapterLoad, comm string, aperture bool, t time.Duration) uint64 {
	var sum float64
	for _, p := range l.Processes {
		if p.Comm != comm {
			continue
		}
		if aperture {
			sum += simhost.At(p.NonLocal, t)
		} else {
			sum += simhost.At(p.Local, t)
		}
	}
	return uint64(sum)
}

// segmentResident is what the model has in segment s: Windows' share plus
// every modelled process's, all of a group's process use counted in its
// first segment. Modelled processes count whether or not they run in the
// VM: the host sees all of the GPU.
func segmentResident(l simhost.AdapterLoad, s int, t time.Duration) uint64 {
	seg := l.Segments[s]
	v := seg.Windows
	for j := range s {
		if l.Segments[j].Aperture == seg.Aperture {
			return v
		}
	}
	for _, p := range l.Processes {
		v += processUsage(simhost.AdapterLoad{Processes: []simhost.ProcessLoad{p}}, p.Comm, seg.Aperture, t)
	}
	return v
}

func (k *Kernel) queryStatistics(c Caller, arg uint64, mem Memory, live func() bool) Result {
	if k.cfg.NoStats {
		return Result{Errno: syscall.ENOTTY}
	}
	args, ok := k.read(mem, arg, sizeQueryStatistics)
	if !ok {
		return k.fail(copyFault)
	}
	typ := le.Uint32(args[0:])
	pid := le.Uint64(args[16:])
	query := le.Uint32(args[statsQueryAt:])
	comm := c.Comm
	if pid != 0 {
		// Kernels with the pid lookup resolve it or answer EINVAL; older
		// ones pass the number to the host as a process handle, which
		// the host refuses as an invalid parameter.
		if k.cfg.NoStatsPID {
			return k.hostFail(statusInvalidParameter)
		}
		if comm, ok = k.commOf(pid); !ok {
			return k.fail(syscall.EINVAL)
		}
	}
	idx := k.adapterByLUID(le.Uint32(args[4:]), le.Uint32(args[8:]))
	if idx < 0 {
		return k.fail(syscall.EINVAL)
	}
	if k.host.queryFail[idx] || k.statsFail(idx) {
		return k.hostFail(statusDeviceRemoved)
	}
	if !live() {
		return Result{Gone: true}
	}
	k.hostRoundTrip()
	l, t := k.load(idx), k.statsClock()
	r := args[statsResultAt:statsQueryAt]
	clear(r)
	switch typ {
	case qsAdapter:
		le.PutUint32(r[0:], uint32(len(l.Segments)))
		le.PutUint32(r[4:], uint32(len(l.Engines)))
	case qsSegment:
		if int(query) >= len(l.Segments) {
			return k.hostFail(statusInvalidParameter)
		}
		s := l.Segments[query]
		res := segmentResident(l, int(query), t)
		le.PutUint64(r[0:], s.Size)
		le.PutUint64(r[8:], res)
		le.PutUint64(r[16:], res)
		if s.Aperture {
			le.PutUint32(r[40:], 1)
		}
	case qsNode:
		if int(query) >= len(l.Engines) {
			return k.hostFail(statusInvalidParameter)
		}
		run := simhost.Integral(l.Engines[query].Busy, t)
		if k.cfg.StatsBackwards {
			run = time.Hour - run
		}
		le.PutUint64(r[0:], uint64(run/100))
	case qsProcessSegmentGroup:
		if query > 1 {
			return k.hostFail(statusInvalidParameter)
		}
		le.PutUint64(r[0:], l.Budget)
		u := processUsage(l, comm, query == 1, t)
		le.PutUint64(r[8:], u)
		le.PutUint64(r[16:], u)
	default:
		return k.hostFail(statusNotSupported)
	}
	if mem.Write(arg, args) != nil {
		return k.fail(copyFault)
	}
	return Result{}
}

func (k *Kernel) queryVideoMemoryInfo(c Caller, arg uint64, mem Memory, live func() bool) Result {
	args, ok := k.read(mem, arg, sizeQueryVidMemInfo)
	if !ok {
		return k.fail(copyFault)
	}
	if le.Uint64(args[0:]) != 0 {
		return k.fail(syscall.EINVAL) // "query vidmem info from another process"
	}
	idx, ok := k.adapterOf(c.Process, le.Uint32(args[8:]))
	if !ok {
		return k.fail(syscall.EINVAL)
	}
	group := le.Uint32(args[12:])
	if group > 1 {
		return k.hostFail(statusInvalidParameter)
	}
	if k.host.queryFail[idx] {
		return k.hostFail(statusDeviceRemoved)
	}
	if !live() {
		return Result{Gone: true}
	}
	k.hostRoundTrip()
	l := k.load(idx)
	u := processUsage(l, c.Comm, group == 1, k.statsClock())
	le.PutUint64(args[16:], l.Budget)
	le.PutUint64(args[24:], u)
	le.PutUint64(args[32:], 0)
	le.PutUint64(args[40:], l.Budget/2)
	if mem.Write(arg, args) != nil {
		return k.fail(copyFault)
	}
	return Result{}
}

func (k *Kernel) statsFail(idx int) bool {
	for _, i := range k.cfg.StatsFail {
		if i == idx {
			return true
		}
	}
	return false
}

// nodeMetadata answers KMTQAITYPE_NODEMETADATA from the model's engines.
func (h *host) nodeMetadata(i int, buf []byte) uint32 {
	if len(buf) != sizeNodeMetadata {
		return statusInvalidParameter
	}
	ord := le.Uint32(buf) & 0xffff
	engines := h.load.Adapters[i].Engines
	if int(ord) >= len(engines) || le.Uint32(buf)>>16 != 0 {
		return statusInvalidParameter
	}
	clear(buf[4:])
	le.PutUint32(buf[4:], engines[ord].Type)
	putUTF16(buf[8:8+64], engines[ord].Name)
	return statusSuccess
}
