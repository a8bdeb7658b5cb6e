package dxg

import "time"

// hostRoundTrip waits out Config.HostLatency before a call the driver
// forwards to the Windows host over the VM bus. On WSL, QUERYADAPTERINFO
// is such a call (dxgvmb_send_query_adapter_info, a synchronous VM-bus
// message the calling thread waits on), and so are the statistics calls
// (QUERYSTATISTICS, QUERYVIDEOMEMORYINFO); ENUMADAPTERS2/3, CLOSEADAPTER and
// OPENADAPTERFROMLUID are answered from the guest driver's own adapter
// list. The simulator answers in microseconds; with a latency set, a
// benchmark sees the start cost as the VM boundary shapes it.
func (k *Kernel) hostRoundTrip() {
	if k.cfg.HostLatency > 0 {
		time.Sleep(k.cfg.HostLatency)
	}
}

// HostCalls counts the calls that reached the Windows host: each is one
// VM-bus round trip on WSL.
func (s Stats) HostCalls() uint64 {
	return s.Calls["QUERYADAPTERINFO"] + s.Calls["QUERYSTATISTICS"] + s.Calls["QUERYVIDEOMEMORYINFO"]
}
