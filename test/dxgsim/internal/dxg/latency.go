package dxg

import "github.com/wsl-gpu-hook/wsl-gpu-hook/test/hostdelay"

// hostRoundTrip waits out Config.HostLatency before a call the driver
// forwards to the Windows host over the VM bus. On WSL, QUERYADAPTERINFO
// is such a call (dxgvmb_send_query_adapter_info, a synchronous VM-bus
// message the calling thread waits on), and so are the statistics calls
// (QUERYSTATISTICS, QUERYVIDEOMEMORYINFO); ENUMADAPTERS2/3, CLOSEADAPTER and
// OPENADAPTERFROMLUID are answered from the guest driver's own adapter
// list. The simulator answers in microseconds; with a latency set, a
// benchmark sees the start cost as the VM boundary shapes it. The wait is
// hostdelay's: time.Sleep would make a 100 µs round trip cost a millisecond.
func (k *Kernel) hostRoundTrip() {
	hostdelay.Wait(k.cfg.HostLatency)
}

// HostCalls counts the calls that reached the Windows host: each is one
// VM-bus round trip on WSL. A process's first open of the device and the
// release of its last dxg file are two more (Stats.ProcessesCreated).
func (s Stats) HostCalls() uint64 {
	return s.Calls["QUERYADAPTERINFO"] + s.Calls["QUERYSTATISTICS"] + s.Calls["QUERYVIDEOMEMORYINFO"] +
		s.ProcessesCreated + s.ProcessesDestroyed
}
