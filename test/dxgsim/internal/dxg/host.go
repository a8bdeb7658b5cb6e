package dxg

import (
	"os"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/simhost"
)

// host is the Windows side: the adapters it reports and its answers to
// QUERYADAPTERINFO, which the driver forwards unchanged.
type host struct {
	adapters []simhost.Adapter
	// storePaths are the DRIVERSTOREPATH answers, per adapter index.
	storePaths []string
	// queryFail marks adapters whose every query fails as if the device
	// had been removed.
	queryFail map[int]bool
	// load is the modelled GPU use the statistics answer (stats.go).
	load simhost.Workload
	// folderFile is Config.FolderFile.
	folderFile string
	// removedFile is Config.RemovedFile.
	removedFile string
	// luidFile is Config.LUIDFile.
	luidFile string
}

func newHost(cfg Config) *host {
	h := &host{queryFail: map[int]bool{}, load: simhost.WorkloadFor(cfg.Profile), folderFile: cfg.FolderFile, removedFile: cfg.RemovedFile, luidFile: cfg.LUIDFile}
	if cfg.Workload != nil {
		h.load = *cfg.Workload
	}
	if !cfg.ZeroAdapters {
		h.adapters = cfg.Profile.Adapters
	}
	missing := map[int]bool{}
	for _, i := range cfg.MissingFolder {
		missing[i] = true
	}
	for i, a := range h.adapters {
		p := a.DriverStorePath
		if missing[i] {
			p = movedStorePath(p)
		}
		h.storePaths = append(h.storePaths, p)
	}
	for _, i := range cfg.QueryFail {
		h.queryFail[i] = true
	}
	return h
}

// movedStorePath returns the path a driver update would give the same
// driver package: the same inf name with another 16-hex-digit hash, so the
// folder no longer exists under /usr/lib/wsl/drivers.
func movedStorePath(p string) string {
	i := strings.LastIndexByte(p, '_')
	if i < 0 || len(p)-i-1 != 16 || !isHex(p[i+1:]) {
		return p + "_0123456789abcdef"
	}
	b := []byte(p)
	for j := i + 1; j < len(b); j++ {
		b[j] = flipHex(b[j])
	}
	return string(b)
}

func isHex(s string) bool {
	for _, c := range []byte(s) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// flipHex maps a hex digit d to 15-d, keeping the letter case, so every
// digit of the new hash differs from the old one.
func flipHex(c byte) byte {
	const lower, upper = "0123456789abcdef", "0123456789ABCDEF"
	switch {
	case c >= '0' && c <= '9':
		return lower[15-(c-'0')]
	case c >= 'a' && c <= 'f':
		return lower[15-(c-'a'+10)]
	default:
		return upper[15-(c-'A'+10)]
	}
}

// queryAdapterInfo answers one query for adapter i, editing buf (exactly
// the caller's private data) in place, and returns the host's NTSTATUS.
func (h *host) queryAdapterInfo(i int, typ uint32, buf []byte) uint32 {
	if h.queryFail[i] {
		return statusDeviceRemoved
	}
	a := h.adapters[i]
	fixed := func(n int) bool { return len(buf) == n }
	switch typ {
	case qaiDriverVersion:
		if !fixed(4) {
			return statusInvalidParameter
		}
		le.PutUint32(buf, a.WDDMVersion)
	case qaiAdapterType, qaiAdapterTypeRender:
		if !fixed(4) {
			return statusInvalidParameter
		}
		le.PutUint32(buf, a.Flags)
	case qaiUMDDriverVersion, qaiKMDDriverVersion:
		if !fixed(8) {
			return statusInvalidParameter
		}
		le.PutUint64(buf, driverVersion(a.VendorID))
	case qaiGetSegmentSize:
		if !fixed(sizeSegmentSizeInfo) {
			return statusInvalidParameter
		}
		le.PutUint64(buf, a.DedicatedMemory)
		le.PutUint64(buf[8:], 0)
		le.PutUint64(buf[16:], sharedSystemMemory)
	case qaiPhysicalAdapterCount:
		if !fixed(4) {
			return statusInvalidParameter
		}
		le.PutUint32(buf, 1) // paravirtual adapters have one physical adapter
	case qaiPhysicalAdapterDeviceIDs:
		if !fixed(sizeDeviceIDs) || le.Uint32(buf) != 0 {
			return statusInvalidParameter
		}
		for k, v := range []uint32{a.VendorID, a.DeviceID, a.SubVendorID, a.SubSystemID, a.RevisionID, busTypePCI} {
			le.PutUint32(buf[4+4*k:], v)
		}
	case qaiAdapterAddress:
		if !fixed(sizeAdapterAddress) {
			return statusInvalidParameter
		}
		bus, dev, fn := adapterAddress(i, a)
		le.PutUint32(buf, bus)
		le.PutUint32(buf[4:], dev)
		le.PutUint32(buf[8:], fn)
	case qaiDriverDescription:
		if !fixed(sizeDriverDescription) {
			return statusInvalidParameter
		}
		clear(buf)
		putUTF16(buf, a.Description)
	case qaiQueryRegistry:
		return h.queryRegistry(i, buf)
	case qaiNodeMetadata:
		return h.nodeMetadata(i, buf)
	default:
		return statusNotSupported
	}
	return statusSuccess
}

// sharedSystemMemory is what a 16 GiB VM's host lends every adapter:
// Windows offers half of its RAM as shared GPU memory.
const sharedSystemMemory = 8 << 30

// busTypePCI is INTERFACE_TYPE PCIBus, the bus_type of PCI GPUs.
const busTypePCI = 5

// queryRegistry answers D3DDDI_QUERYREGISTRY_INFO. Only the driver store
// path is modelled; other registry reads report status FAIL, as for a
// value that does not exist.
func (h *host) queryRegistry(i int, buf []byte) uint32 {
	if len(buf) < sizeRegistryInfo {
		return statusInvalidParameter
	}
	qt := le.Uint32(buf[regQueryType:])
	if qt > regTypeDriverImagePath || le.Uint32(buf[regPhysicalAdapter:]) != 0 {
		return statusInvalidParameter
	}
	if qt != regTypeDriverStorePath {
		le.PutUint32(buf[regOutputSize:], 0)
		le.PutUint32(buf[regStatus:], regStatusFail)
		return statusSuccess
	}
	value := utf16.Encode([]rune(h.storePath(i) + "\x00"))
	need := 2 * len(value)
	le.PutUint32(buf[regOutputSize:], uint32(need))
	// The documented sequence allocates sizeof(info) + need, so anything
	// shorter is an overflow even though 8 output bytes live inside the
	// struct: a client that forgets them is caught here.
	if len(buf) < sizeRegistryInfo+need {
		le.PutUint32(buf[regStatus:], regStatusBufferOverflow)
		return statusSuccess
	}
	for k, u := range value {
		le.PutUint16(buf[regOutput+2*k:], u)
	}
	le.PutUint32(buf[regStatus:], regStatusSuccess)
	return statusSuccess
}

// storePath is adapter i's driver store path, with the folder file's
// override for i if there is one now.
func (h *host) storePath(i int) string {
	p := h.storePaths[i]
	if h.folderFile == "" {
		return p
	}
	data, _ := os.ReadFile(h.folderFile)
	for _, l := range strings.Fields(string(data)) {
		n, name, ok := strings.Cut(l, "=")
		if ok && n == strconv.Itoa(i) && name != "" && !strings.ContainsAny(name, `/\`) {
			return p[:strings.LastIndexAny(p, `\`)+1] + name
		}
	}
	return p
}

// removed is the set of adapters the removed file hides now.
func (h *host) removed() map[int]bool {
	if h.removedFile == "" {
		return nil
	}
	data, _ := os.ReadFile(h.removedFile)
	out := map[int]bool{}
	for _, l := range strings.Fields(string(data)) {
		if n, err := strconv.Atoi(l); err == nil {
			out[n] = true
		}
	}
	return out
}

// luid is adapter i's LUID now: the profile's, or luidFile's line i.
func (h *host) luid(i int) (low, high uint32) {
	a := h.adapters[i]
	if h.luidFile == "" {
		return a.LUIDLow, a.LUIDHigh
	}
	data, _ := os.ReadFile(h.luidFile)
	for _, l := range strings.Fields(string(data)) {
		n, hex, ok := strings.Cut(l, "=")
		if idx, err := strconv.Atoi(n); ok && err == nil && idx == i {
			if v, err := strconv.ParseUint(strings.TrimPrefix(hex, "0x"), 16, 64); err == nil && v != 0 {
				return uint32(v), uint32(v >> 32)
			}
		}
	}
	return a.LUIDLow, a.LUIDHigh
}

// byLUID is the index of the adapter whose LUID is low, high now; -1 for
// none (a LUID of before a reboot names nothing).
func (h *host) byLUID(low, high uint32) int {
	for i := range h.adapters {
		if l, hi := h.luid(i); l == low && hi == high {
			return i
		}
	}
	return -1
}

// putUTF16 writes s as NUL-terminated UTF-16LE, truncated to fit.
func putUTF16(buf []byte, s string) {
	u := utf16.Encode([]rune(s))
	if max := len(buf)/2 - 1; len(u) > max {
		u = u[:max]
	}
	for k, c := range u {
		le.PutUint16(buf[2*k:], c)
	}
	le.PutUint16(buf[2*len(u):], 0)
}

// driverVersion is a plausible Windows driver version (a.b.c.d packed in
// 16-bit fields) for UMD/KMD_DRIVER_VERSION; profiles do not carry one.
func driverVersion(vendor uint32) uint64 {
	v := [4]uint64{10, 0, 26100, 1}
	switch vendor {
	case simhost.VendorNVIDIA:
		v = [4]uint64{32, 0, 15, 6094}
	case simhost.VendorAMD:
		v = [4]uint64{31, 0, 24027, 1012}
	case simhost.VendorIntel:
		v = [4]uint64{32, 0, 101, 6078}
	}
	return v[0]<<48 | v[1]<<32 | v[2]<<16 | v[3]
}

// adapterAddress is a plausible PCI location: Intel iGPUs sit at 0:2.0 and
// NPUs at 0:11.0; discrete adapters get a bus of their own.
func adapterAddress(i int, a simhost.Adapter) (bus, dev, fn uint32) {
	if a.VendorID == simhost.VendorIntel {
		if a.ComputeOnly() {
			return 0, 11, 0
		}
		return 0, 2, 0
	}
	return uint32(i + 1), 0, 0
}
