package request

import "github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"

// Targets returns the selector view of each of adapters. Indexes are the
// host's enumeration order; VendorIndex numbers the adapters a vendor's
// selector takes among themselves, as NVIDIA_VISIBLE_DEVICES counts NVIDIA
// GPUs (Docker's --gpus 1 means the first CUDA GPU, not an Intel iGPU
// enumerated before it) and amd.com/gpu=N counts AMD's GPUs.
func Targets(adapters []driverstore.Adapter) func(driverstore.Adapter) Target {
	vendorIndex := map[int]int{}
	count := map[driverstore.Vendor]int{}
	for _, a := range adapters {
		if (Selector{Kind: ByVendor, Vendor: string(a.Vendor)}).Match(target(a, 0), false) {
			vendorIndex[a.Index] = count[a.Vendor]
			count[a.Vendor]++
		}
	}
	return func(a driverstore.Adapter) Target {
		n, ok := vendorIndex[a.Index]
		if !ok {
			n = -1
		}
		return target(a, n)
	}
}

func target(a driverstore.Adapter, vendorIndex int) Target {
	return Target{Index: a.Index, LUID: a.LUID, Vendor: string(a.Vendor), Kind: a.Kind(), VendorIndex: vendorIndex}
}

// Adapters returns the adapters r selects, in host order.
func Adapters(r Selection, adapters []driverstore.Adapter) ([]driverstore.Adapter, error) {
	return Select(r, adapters, Targets(adapters))
}
