package request

import "github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/driverstore"

// Targets returns the selector view of each of adapters. Indexes are the
// host's enumeration order; NVIDIAIndex numbers the NVIDIA adapters among
// themselves, as NVIDIA_VISIBLE_DEVICES counts them (Docker's --gpus 1
// means the first CUDA GPU, not an Intel iGPU enumerated before it).
func Targets(adapters []driverstore.Adapter) func(driverstore.Adapter) Target {
	nvidia := map[int]int{}
	for _, a := range adapters {
		if a.Vendor == driverstore.NVIDIA {
			nvidia[a.Index] = len(nvidia)
		}
	}
	return func(a driverstore.Adapter) Target {
		n, ok := nvidia[a.Index]
		if !ok {
			n = -1
		}
		return Target{Index: a.Index, LUID: a.LUID, Vendor: string(a.Vendor), Kind: a.Kind(), NVIDIAIndex: n}
	}
}

// Adapters returns the adapters r selects, in host order.
func Adapters(r Selection, adapters []driverstore.Adapter) ([]driverstore.Adapter, error) {
	return Select(r, adapters, Targets(adapters))
}
