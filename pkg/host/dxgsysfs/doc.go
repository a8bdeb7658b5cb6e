// Package dxgsysfs reads, from sysfs, which devices the guest kernel's GPU
// paravirtualization driver (dxgkrnl) is bound to: a warm start's way to
// know that the adapters are still the ones it cached without opening
// /dev/dxg, which on WSL costs two VM-bus round trips to the Windows host
// (the driver makes the process's dxg process object there at the first
// open and destroys it at the last close).
//
// What dxgkrnl does (drivers/hv/dxgkrnl, dxgmodule.c): each adapter is a
// PCI device (Microsoft 1414:008e) whose config space names the VM-bus
// channel of the adapter, and a per-adapter VM-bus channel device
// ("vGPU" class) with that channel's instance GUID; the adapter is listed
// by ENUMADAPTERS only while both exist, and its LUID is the first eight
// bytes of the channel's instance GUID (guid_to_luid: the host sets the
// GUID's low part to the adapter's LUID). VM-bus devices are named by
// their instance GUID in sysfs (vmbus_device_register: "%pUl"), so
//
//	/sys/bus/vmbus/drivers/dxgkrnl/<GUID>  (the global channel and one per adapter)
//	/sys/bus/pci/drivers/dxgkrnl/<address> (one per adapter)
//
// list every adapter and give its LUID, read in the guest with no host
// round trip. A reading's Stamp holds every entry's name and inode (sysfs
// gives a re-created entry a new inode, so a device removed and offered
// again changes it even under the same name).
//
// Callers must not trust the convention blindly: Covers checks a reading
// against an enumeration's LUIDs, and only a reading that names every
// enumerated adapter may stand in for the enumeration later.
package dxgsysfs
