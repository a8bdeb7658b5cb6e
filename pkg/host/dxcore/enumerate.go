package dxcore

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Errors callers test with errors.Is. Each text is the advice a user reads
// at the end of the one-line error.
var (
	// ErrNoDevice: the dxg device does not exist.
	ErrNoDevice = errors.New("not a WSL2 VM with GPU paravirtualization: run this inside WSL2 on Windows 10 21H2+/11 with a current GPU driver, or point dxg_device in the config at the device")
	// ErrPermission: the dxg device exists but this user cannot open it.
	ErrPermission = errors.New("the GPU device is not accessible to this user: run as root or make /dev/dxg mode 0666 (WSL's default)")
	// ErrUnsupported: neither enumerate ioctl is known to the kernel.
	ErrUnsupported = errors.New("the WSL kernel does not know the dxg adapter ioctls: update WSL (wsl --update)")
	// ErrNoAdapters: the host lists no adapter, or none answered its queries.
	ErrNoAdapters = errors.New("no GPU adapters: the Windows host exposes none to WSL: install or update the Windows GPU driver, then run wsl --shutdown")
	// ErrEmulated: an emulator refused the ioctls before the kernel saw
	// them. qemu-user answers every ioctl number missing from its own
	// table with ENOSYS, and the dxg numbers are not in it; a kernel never
	// answers an ioctl with ENOSYS.
	ErrEmulated = errors.New("the dxg ioctls never reached the kernel: an emulator (qemu-user) runs this binary and does not pass them on: run the build for this machine's architecture")
)

// enum2Attempts bounds the ENUMADAPTERS2 count/fill loop: each EOVERFLOW
// means an adapter arrived between the two calls, which settles quickly.
const enum2Attempts = 4

// adapterIoctls is the dxg ioctl surface enumeration needs, one method per
// ioctl. device implements it on a real fd; tests implement it to play
// kernels and hosts no machine here has.
type adapterIoctls interface {
	// enumAdapters3 and enumAdapters2 fill infos (sizeofAdapterInfo bytes
	// per entry; nil asks for the count only) and return the count the
	// kernel wrote back.
	enumAdapters3(filter uint64, infos []byte) (uint32, error)
	enumAdapters2(infos []byte) (uint32, error)
	queryAdapterInfo(handle, typ uint32, data []byte) error
	closeAdapter(handle uint32) error
}

// Options selects what EnumerateWith asks the host about each adapter.
type Options struct {
	// Details adds the queries only reports need: WDDM version, adapter
	// type and description (DRIVERVERSION, ADAPTERTYPE, DRIVER_DESCRIPTION).
	// Without it each Adapter holds its index, LUID, PCI ids and driver
	// store path, which is all that choosing and mounting a driver needs,
	// for three ioctls per adapter instead of six: each is a round trip to
	// the Windows host, on every container start.
	Details bool
	// CloseHandlesWithFD leaves the adapter handles to the close of
	// EnumerateWith's own /dev/dxg fd instead of sending one
	// LX_DXCLOSEADAPTER per adapter. The driver keeps one handle table per
	// process and frees every handle in it when the process's last dxg
	// file is released (dxgk_release, dxgprocess_destroy), so for a caller
	// whose process holds no other /dev/dxg fd the closes are ioctls that
	// change nothing: the fd close a moment later frees the same handles.
	//
	// Set it only in short-lived processes that open /dev/dxg nowhere else
	// (the hook: one enumeration, then exit). In a process that keeps
	// another dxg fd open (a loaded libdxcore or libd3d12, a concurrent
	// EnumerateWith in another goroutine) the handles would live until
	// that fd closes too, one set per call: a leak in a long-lived caller
	// such as the device plugin, which keeps the default.
	CloseHandlesWithFD bool
	// Known, when set, is shown the listed adapters' LUIDs, in order,
	// before any adapter is queried. If it returns true the adapters are
	// not queried: the Enumeration holds only each adapter's Index and
	// LUID and has Listed set. Listing is answered by the guest's kernel;
	// each query is a round trip to the Windows host, so a caller that
	// already knows what these adapters answer (a probe cache keyed on the
	// LUIDs, which the host assigns anew when an adapter starts) asks
	// nothing.
	Known func(luids []LUID) bool
	// Resources adds what a scheduler compares adapters by: the user-mode
	// driver version (UMD_DRIVER_VERSION) and the memory segment sizes
	// (GETSEGMENTSIZE), two more round trips per adapter. Neither is
	// required: a host that does not answer leaves them 0. The DRA driver
	// publishes them; nothing on a container start asks.
	Resources bool
}

// enumerateWith lists and queries the adapters, closing every handle it got
// unless opt leaves them to the close of the fd.
func enumerateWith(d adapterIoctls, opt Options) (*Enumeration, error) {
	infos, name, err := listAdapters(d)
	if !opt.CloseHandlesWithFD {
		defer closeAll(d, infos)
	}
	if err != nil {
		return nil, err
	}
	if len(infos) == 0 {
		return nil, ErrNoAdapters
	}
	e := &Enumeration{Ioctl: name}
	if opt.Known != nil {
		luids := make([]LUID, len(infos))
		for i, info := range infos {
			luids[i] = info.luid
		}
		if opt.Known(luids) {
			e.Listed = true
			for i, l := range luids {
				e.Adapters = append(e.Adapters, Adapter{Index: i, LUID: l})
			}
			return e, nil
		}
	}
	for i, info := range infos {
		a, err := queryAdapter(d, info.handle, opt)
		if err != nil {
			e.Skipped = append(e.Skipped, &AdapterError{Index: i, LUID: info.luid, Err: err})
			continue
		}
		a.Index, a.LUID = i, info.luid
		e.Adapters = append(e.Adapters, a)
	}
	if len(e.Adapters) == 0 {
		return e, &allSkippedError{skipped: e.Skipped}
	}
	return e, nil
}

// listAdapters returns the adapters and the name of the call that listed
// them. The returned handles are open even when err is not nil.
func listAdapters(d adapterIoctls) ([]adapterInfo, string, error) {
	infos, err := enumAdapters3(d)
	var unknown *unknownCallError
	if !errors.As(err, &unknown) {
		return infos, "ENUMADAPTERS3", err
	}
	infos, err = enumAdapters2(d)
	if errors.As(err, &unknown) {
		return nil, "", fmt.Errorf("%w: %w", unknown.err, ErrUnsupported)
	}
	return infos, "ENUMADAPTERS2", err
}

// unknownCallError marks a call the kernel does not know: ENOTTY from the
// dxg dispatcher (or from any other device), or EINVAL from kernels that
// reject what they do not know. The first call of each kind decides: once
// it answered, the kernel knows the call and later errors are real.
type unknownCallError struct {
	call string
	err  error
}

func (e *unknownCallError) Error() string { return e.call + ": " + e.err.Error() }
func (e *unknownCallError) Unwrap() error { return e.err }

func firstCallError(call string, err error) error {
	if errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.EINVAL) {
		return &unknownCallError{call: call, err: err}
	}
	if errors.Is(err, unix.ENOSYS) {
		return fmt.Errorf("%s: %w: %w", call, err, ErrEmulated)
	}
	return fmt.Errorf("%s: %w", call, err)
}

// enumAdapters3 fills with capacity 64 at once: with a smaller capacity
// than the adapters present the kernel writes past its own buffer, and 64
// is D3DKMT_ADAPTERS_MAX. No count query comes first. It would only say
// whether the kernel knows the call, and the fill says that too: a kernel
// without ENUMADAPTERS3 answers it with the dispatcher's ENOTTY (EINVAL on
// kernels that reject what they do not know) before opening anything, and
// a kernel that knows the call cannot give EINVAL for this argument except
// on a copy fault, which valid Go buffers do not cause. Whenever the fill
// fails, dxgkp_enum_adapters has closed every handle it opened, so falling
// back to ENUMADAPTERS2 leaves nothing open. No adapters is a successful
// fill with a count of 0.
func enumAdapters3(d adapterIoctls) ([]adapterInfo, error) {
	buf := make([]byte, adaptersMax*sizeofAdapterInfo)
	n, err := d.enumAdapters3(enumFilterComputeOnly, buf)
	if err != nil {
		return nil, firstCallError("LX_DXENUMADAPTERS3", err)
	}
	return checkedInfos(buf, n, adaptersMax, "LX_DXENUMADAPTERS3")
}

// enumAdapters2 must pass a capacity of at least the current count (less is
// EOVERFLOW, more than 64 is EINVAL), so it asks again when adapters appear
// between the count and the fill.
func enumAdapters2(d adapterIoctls) ([]adapterInfo, error) {
	var err error
	for range enum2Attempts {
		var n uint32
		n, err = d.enumAdapters2(nil)
		if err != nil {
			return nil, firstCallError("LX_DXENUMADAPTERS2 count", err)
		}
		if n == 0 {
			return nil, nil
		}
		n = min(n, adaptersMax)
		buf := make([]byte, n*sizeofAdapterInfo)
		var got uint32
		got, err = d.enumAdapters2(buf)
		if errors.Is(err, unix.EOVERFLOW) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("LX_DXENUMADAPTERS2: %w", err)
		}
		return checkedInfos(buf, got, n, "LX_DXENUMADAPTERS2")
	}
	return nil, fmt.Errorf("LX_DXENUMADAPTERS2: adapter count still changing after %d attempts: %w", enum2Attempts, err)
}

// checkedInfos decodes a filled array. A count above the capacity cannot
// come from a sane kernel: the entries we have are returned so their
// handles get closed, with an error.
func checkedInfos(buf []byte, n, capacity uint32, call string) ([]adapterInfo, error) {
	infos := decodeAdapterInfos(buf, min(n, capacity))
	if n > capacity {
		return infos, fmt.Errorf("%s: kernel reported %d adapters for a capacity of %d", call, n, capacity)
	}
	return infos, nil
}

// closeAll closes every handle an enumerate call returned. A failed close
// cannot be acted on: closing the fd frees the handle anyway.
func closeAll(d adapterIoctls, infos []adapterInfo) {
	for _, info := range infos {
		if info.handle != 0 {
			_ = d.closeAdapter(info.handle)
		}
	}
}

// queryAdapter asks the host for what an Adapter holds. Ids and driver
// store path are required, and with opt.Details version and type too; the
// description never is.
func queryAdapter(d adapterIoctls, h uint32, opt Options) (Adapter, error) {
	var a Adapter
	var err error
	if opt.Details {
		if a.WDDMVersion, err = queryUint32(d, h, qaiDriverVersion); err != nil {
			return a, fmt.Errorf("query DRIVERVERSION: %w", err)
		}
		t, err := queryUint32(d, h, qaiAdapterType)
		if err != nil {
			// Some hosts answer only the render-adapter form of the query.
			var err2 error
			if t, err2 = queryUint32(d, h, qaiAdapterTypeRender); err2 != nil {
				return a, fmt.Errorf("query ADAPTERTYPE: %w (ADAPTERTYPE_RENDER: %v)", err, err2)
			}
		}
		a.Type = AdapterType(t)
	}
	ids := newDeviceIDsRequest()
	if err := d.queryAdapterInfo(h, qaiPhysicalAdapterDevIDs, ids); err != nil {
		return a, fmt.Errorf("query PHYSICALADAPTERDEVICEIDS: %w", err)
	}
	if a.PCI, err = decodeDeviceIDs(ids); err != nil {
		return a, fmt.Errorf("query PHYSICALADAPTERDEVICEIDS: %w", err)
	}
	if a.DriverStorePath, err = queryDriverStorePath(d, h); err != nil {
		return a, fmt.Errorf("query driver store path: %w", err)
	}
	if opt.Details {
		desc := make([]byte, sizeofDriverDescription)
		if d.queryAdapterInfo(h, qaiDriverDescription, desc) == nil {
			a.Description = decodeUTF16(desc)
		}
	}
	if opt.Resources {
		v := make([]byte, 8)
		if d.queryAdapterInfo(h, qaiUMDDriverVersion, v) == nil {
			a.DriverVersion = DriverVersion(binary.LittleEndian.Uint64(v))
		}
		seg := make([]byte, sizeofSegmentSizeInfo)
		if d.queryAdapterInfo(h, qaiGetSegmentSize, seg) == nil {
			a.Memory = decodeSegmentSizes(seg)
		}
	}
	return a, nil
}

func queryUint32(d adapterIoctls, h, typ uint32) (uint32, error) {
	b := make([]byte, 4)
	if err := d.queryAdapterInfo(h, typ, b); err != nil {
		return 0, err
	}
	return decodeUint32(b)
}

// registryAttempts allows the first question, the question with the size
// the host asked for, and one more round should the value grow between them.
const registryAttempts = 3

// registryFirstValueSize is the room the first QUERYREGISTRY request leaves
// for the path: 260 UTF-16 units (MAX_PATH, its NUL included), 1072 bytes
// in all. A driver store path is the FileRepository folder plus
// <inf>_amd64_<16 hex>, 82 characters for nv_dispi.inf and 86 in the \\?\
// form, so the host answers SUCCESS at once instead of BUFFER_OVERFLOW and
// the size: one round trip to the host per adapter instead of two. 260 is
// what Windows' own paravirtualized-adapter code sends the host for this
// query (1072 bytes, one request), so the host is known to answer that
// size; more room would only make every request longer for paths that do
// not occur, and a path past MAX_PATH still works through the
// BUFFER_OVERFLOW round. output_value_size is an output only (d3dukmdt.h):
// the host sizes its answer by private_data_size, so it is sent as 0.
const registryFirstValueSize = 260 * 2

// queryDriverStorePath runs the QUERYREGISTRY(DRIVERSTOREPATH) exchange:
// the first request has room for any usual path; a longer one comes back as
// BUFFER_OVERFLOW with the size it needs, and is asked for again.
func queryDriverStorePath(d adapterIoctls, h uint32) (string, error) {
	size := uint32(registryFirstValueSize)
	for range registryAttempts {
		req := newRegistryRequest(size)
		if err := d.queryAdapterInfo(h, qaiQueryRegistry, req); err != nil {
			return "", fmt.Errorf("QUERYREGISTRY: %w", err)
		}
		path, need, err := decodeRegistry(req)
		if err != nil {
			return "", fmt.Errorf("QUERYREGISTRY: %w", err)
		}
		if need == 0 {
			if path == "" {
				return "", errors.New("QUERYREGISTRY: the host returned an empty path")
			}
			return path, nil
		}
		size = need
	}
	return "", fmt.Errorf("QUERYREGISTRY: still BUFFER_OVERFLOW after %d attempts", registryAttempts)
}

// allSkippedError reports that every listed adapter failed its queries; it
// matches ErrNoAdapters and unwraps to each adapter's error.
type allSkippedError struct{ skipped []*AdapterError }

func (e *allSkippedError) Error() string {
	return fmt.Sprintf("no usable GPU adapters: all %d failed their queries, first %v: install or update the Windows GPU driver, then run wsl --shutdown",
		len(e.skipped), e.skipped[0])
}

func (e *allSkippedError) Is(target error) bool { return target == ErrNoAdapters }

func (e *allSkippedError) Unwrap() []error {
	errs := make([]error, len(e.skipped))
	for i, s := range e.skipped {
		errs[i] = s
	}
	return errs
}
