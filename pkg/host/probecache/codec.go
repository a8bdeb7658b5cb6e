package probecache

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/ldcache"
)

// The file is a fixed sequence of little-endian fields, written and read by
// hand: every start reads it, and encoding/json's first decode of a type
// (its reflection over each struct's fields) cost the hook about a quarter
// of its probe's CPU time. Strings and lists carry a uint32 length; a
// length longer than what is left of the file is an error before anything
// is allocated, so a hostile file cannot make the hook allocate more than
// MaxSize. Every byte must be consumed. TestCodecCoversEveryField fails
// when a field is added to a cached type and not here.

// magic starts every cache file; the format version follows it.
const magic = "WSLGPUPC"

var errTruncated = errors.New("truncated")

func encode(k *Key, p *Probe) []byte {
	var e encoder
	e.b = append(e.b, magic...)
	e.u32(version)
	e.str(k.BootID)
	e.str(k.Device)
	e.str(k.LibDir)
	e.str(k.DriversDir)
	e.bool(k.Details)
	e.bool(k.Ldcache)
	e.u32(uint32(len(k.LUIDs)))
	for _, l := range k.LUIDs {
		e.u64(l)
	}
	e.stamp(k.Lib)
	e.stamp(k.Drivers)
	e.str(k.Sysfs)
	e.str(k.Bound)

	e.u32(uint32(len(p.Adapters)))
	for _, a := range p.Adapters {
		e.u64(uint64(a.Index))
		e.u32(a.LUID.Low)
		e.u32(uint32(a.LUID.High))
		e.u32(a.WDDMVersion)
		e.u32(uint32(a.Type))
		e.u32(a.PCI.Vendor)
		e.u32(a.PCI.Device)
		e.u32(a.PCI.SubVendor)
		e.u32(a.PCI.SubSystem)
		e.u32(a.PCI.Revision)
		e.str(a.Description)
		e.str(a.DriverStorePath)
		e.u64(uint64(a.DriverVersion))
		e.u64(a.Memory.DedicatedVideo)
		e.u64(a.Memory.DedicatedSystem)
		e.u64(a.Memory.SharedSystem)
		e.str(string(a.Vendor))
		e.str(a.Folder)
		e.str(a.Registry)
	}
	e.u32(uint32(len(p.Folders)))
	for _, f := range p.Folders {
		e.str(f.Name)
		e.str(string(f.Vendor))
		e.u32(uint32(len(f.Adapters)))
		for _, i := range f.Adapters {
			e.u64(uint64(i))
		}
	}
	e.bool(p.NvidiaSmi.InLibDir)
	e.u32(uint32(len(p.NvidiaSmi.Folders)))
	for _, f := range p.NvidiaSmi.Folders {
		e.str(f)
	}
	// nil (no loader-cache probe) and empty differ: validate checks which.
	e.bool(p.Ldcache != nil)
	e.u32(uint32(len(p.Ldcache)))
	for _, en := range p.Ldcache {
		e.str(en.Key)
		e.str(en.Path)
		e.u32(uint32(en.Flags))
		e.u32(en.OSVersion)
		e.u64(en.HWCap)
		e.str(en.HWCapsSubdir)
	}
	return e.b
}

func decode(data []byte) (*Key, *Probe, error) {
	d := decoder{b: data}
	if len(data) < len(magic) || string(data[:len(magic)]) != magic {
		return nil, nil, errors.New("not a probe cache file")
	}
	d.b = d.b[len(magic):]
	if v := d.u32(); d.err == nil && v != version {
		return nil, nil, fmt.Errorf("format %d, want %d", v, version)
	}
	k := &Key{}
	k.BootID = d.str()
	k.Device = d.str()
	k.LibDir = d.str()
	k.DriversDir = d.str()
	k.Details = d.bool()
	k.Ldcache = d.bool()
	if n := d.count(8); n > 0 {
		k.LUIDs = make([]uint64, n)
		for i := range k.LUIDs {
			k.LUIDs[i] = d.u64()
		}
	}
	k.Lib = d.stamp()
	k.Drivers = d.stamp()
	k.Sysfs = d.str()
	k.Bound = d.str()

	p := &Probe{}
	if n := d.count(8); n > 0 {
		p.Adapters = make([]Adapter, n)
		for i := range p.Adapters {
			a := &p.Adapters[i]
			a.Index = int(d.u64())
			a.LUID.Low = d.u32()
			a.LUID.High = int32(d.u32())
			a.WDDMVersion = d.u32()
			a.Type = dxcore.AdapterType(d.u32())
			a.PCI.Vendor = d.u32()
			a.PCI.Device = d.u32()
			a.PCI.SubVendor = d.u32()
			a.PCI.SubSystem = d.u32()
			a.PCI.Revision = d.u32()
			a.Description = d.str()
			a.DriverStorePath = d.str()
			a.DriverVersion = dxcore.DriverVersion(d.u64())
			a.Memory.DedicatedVideo = d.u64()
			a.Memory.DedicatedSystem = d.u64()
			a.Memory.SharedSystem = d.u64()
			a.Vendor = driverstore.Vendor(d.str())
			a.Folder = d.str()
			a.Registry = d.str()
		}
	}
	if n := d.count(8); n > 0 {
		p.Folders = make([]Folder, n)
		for i := range p.Folders {
			f := &p.Folders[i]
			f.Name = d.str()
			f.Vendor = driverstore.Vendor(d.str())
			if m := d.count(8); m > 0 {
				f.Adapters = make([]int, m)
				for j := range f.Adapters {
					f.Adapters[j] = int(d.u64())
				}
			}
		}
	}
	p.NvidiaSmi.InLibDir = d.bool()
	if n := d.count(4); n > 0 {
		p.NvidiaSmi.Folders = make([]string, n)
		for i := range p.NvidiaSmi.Folders {
			p.NvidiaSmi.Folders[i] = d.str()
		}
	}
	hasLdcache := d.bool()
	n := d.count(4 + 4 + 4 + 4 + 8 + 4)
	if hasLdcache {
		p.Ldcache = make([]ldcache.Entry, n)
	} else if n > 0 && d.err == nil {
		d.err = errors.New("loader entries marked absent")
	}
	for i := range p.Ldcache {
		en := &p.Ldcache[i]
		en.Key = d.str()
		en.Path = d.str()
		en.Flags = int32(d.u32())
		en.OSVersion = d.u32()
		en.HWCap = d.u64()
		en.HWCapsSubdir = d.str()
	}
	if d.err != nil {
		return nil, nil, d.err
	}
	if len(d.b) != 0 {
		return nil, nil, errors.New("data after the cache")
	}
	return k, p, nil
}

type encoder struct{ b []byte }

func (e *encoder) u32(v uint32) { e.b = binary.LittleEndian.AppendUint32(e.b, v) }
func (e *encoder) u64(v uint64) { e.b = binary.LittleEndian.AppendUint64(e.b, v) }
func (e *encoder) str(s string) { e.u32(uint32(len(s))); e.b = append(e.b, s...) }

func (e *encoder) bool(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}

func (e *encoder) stamp(s Stamp) {
	e.u64(s.Dev)
	e.u64(s.Ino)
	e.u32(s.Mode)
	e.u64(uint64(s.Mtime))
	e.u64(uint64(s.Ctime))
}

// decoder reads fields off b; after the first error every read returns
// zero and err stays the first error.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n > len(d.b) {
		d.err = errTruncated
		return nil
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out
}

func (d *decoder) u32() uint32 {
	if b := d.take(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (d *decoder) u64() uint64 {
	if b := d.take(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

func (d *decoder) bool() bool {
	b := d.take(1)
	switch {
	case b == nil:
		return false
	case b[0] > 1:
		d.err = fmt.Errorf("boolean %d", b[0])
		return false
	}
	return b[0] == 1
}

// count reads a list's length, each element at least min bytes: a count
// the rest of the file cannot hold is an error, not an allocation.
func (d *decoder) count(min int) int {
	n := d.u32()
	if d.err == nil && uint64(n)*uint64(min) > uint64(len(d.b)) {
		d.err = errTruncated
	}
	if d.err != nil {
		return 0
	}
	return int(n)
}

func (d *decoder) str() string {
	n := d.count(1)
	return string(d.take(n))
}

func (d *decoder) stamp() Stamp {
	return Stamp{Dev: d.u64(), Ino: d.u64(), Mode: d.u32(), Mtime: int64(d.u64()), Ctime: int64(d.u64())}
}
