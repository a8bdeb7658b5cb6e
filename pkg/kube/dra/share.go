package dra

import (
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
)

// Sharing is how claims share an adapter by its memory (consumable
// capacity, KEP-5075): a shared device allows many allocations, each
// consuming part of its memory capacity, and the scheduler never lets
// their sum pass the capacity. Windows enforces none of it: the amount is
// a scheduling promise, not a limit on what a process may allocate.
type Sharing struct {
	// Step is the smallest share and what every request is rounded up
	// to a multiple of; 0 turns sharing off (one claim per device).
	Step int64
	// Default is what a claim that asks no memory consumes (rounded up
	// to Step, and to at most the whole device).
	Default int64
}

// Validate says what is wrong with s, for the command line.
func (s Sharing) Validate() error {
	switch {
	case s.Step < 0 || s.Default < 0:
		return fmt.Errorf("memory step %d and default %d: want 0 or more", s.Step, s.Default)
	case s.Step > 0 && s.Default == 0:
		return fmt.Errorf("memory default 0 with step %d: a claim that asks nothing must consume something, or any number would fit", s.Step)
	}
	return nil
}

// carveOut is the most an adapter may own and still count as integrated:
// an integrated GPU's own memory is a firmware carve-out of 128 to 512
// MiB, and Windows gives it system memory on top (Task Manager's shared
// GPU memory); a discrete GPU has gigabytes of its own.
const carveOut = 512 << 20

// Memory is the adapter's memory capacity as the driver publishes it:
// its dedicated video memory, and for an adapter with less than 512 MiB
// of its own (an integrated GPU, an NPU) that plus the system memory
// Windows budgets it.
func Memory(a driverstore.Adapter) int64 {
	m := a.Memory.DedicatedVideo
	if m < carveOut {
		m += a.Memory.SharedSystem
	}
	return int64(min(m, 1<<62))
}

// integrated is the integrated attribute: what the host says on hybrid
// laptops, else whether the adapter owns no more than a carve-out; a
// software adapter (WARP) is neither.
func integrated(a driverstore.Adapter) (value, known bool) {
	switch {
	case a.Type&dxcore.TypeHybridIntegrate != 0:
		return true, true
	case a.Type&dxcore.TypeHybridDiscrete != 0:
		return false, true
	case a.Type.Software():
		return false, false
	}
	return a.Memory.DedicatedVideo < carveOut, true
}

// shared is the device's memory capacity, and whether claims share it:
// only with sharing on and room for two steps (the API wants min + step
// within the capacity). A shared device's capacity is rounded down to a
// multiple of the step, so a claim that asks for all of it (exclusive
// use) asks for a valid amount.
func (s Sharing) shared(memory int64) (resourceapi.DeviceCapacity, bool) {
	if s.Step <= 0 || memory < 2*s.Step {
		return resourceapi.DeviceCapacity{Value: *resource.NewQuantity(memory, resource.BinarySI)}, false
	}
	whole := memory / s.Step * s.Step
	def := min((max(s.Default, 1)+s.Step-1)/s.Step*s.Step, whole)
	return resourceapi.DeviceCapacity{
		Value: *resource.NewQuantity(whole, resource.BinarySI),
		RequestPolicy: &resourceapi.CapacityRequestPolicy{
			Default: resource.NewQuantity(def, resource.BinarySI),
			ValidRange: &resourceapi.CapacityRequestPolicyRange{
				Min:  resource.NewQuantity(s.Step, resource.BinarySI),
				Step: resource.NewQuantity(s.Step, resource.BinarySI),
			},
		},
	}, true
}

// share publishes dev's memory under s: shareable, with its request
// policy, or whole.
func (s Sharing) share(dev *resourceapi.Device, memory int64) {
	c, ok := s.shared(memory)
	dev.Capacity[CapacityMemory] = c
	if ok {
		dev.AllowMultipleAllocations = ptr.To(true)
	}
}

// Promise is memory promised to a prepared claim on one device: what the
// driver knows of "requested by claims", to set beside what the claim's
// processes use (package gpumetrics measures that per process).
type Promise struct {
	// The claim.
	Namespace, Name, UID string
	// Device is the device's name in the pool, LUID its adapter's at
	// prepare.
	Device, LUID string
	// Memory is in bytes: the claim's share, or the whole device when it
	// has it alone; 0 for a claim prepared before sharing existed
	// (checkpoint version 2).
	Memory int64
	// Shared: the device is shared by memory with other claims.
	Shared bool
}

// Promises is the memory promised to each prepared claim on each device,
// ordered by claim UID, then as allocated. Claims with admin access hold
// nothing (the scheduler counts them for no one) and are left out.
func (c *Checkpoint) Promises() []Promise {
	var out []Promise
	for _, uid := range sortedKeys(c.Claims) {
		p := c.Claims[uid]
		for _, d := range p.Devices {
			if d.AdminAccess {
				continue
			}
			out = append(out, Promise{Namespace: p.Namespace, Name: p.Name, UID: uid, Device: d.Device, LUID: d.LUID, Memory: d.Memory, Shared: d.ShareID != ""})
		}
	}
	return out
}

// Promised sums Promises per adapter, by LUID: the memory prepared claims
// were promised on each.
func (c *Checkpoint) Promised() map[string]int64 {
	out := map[string]int64{}
	for _, p := range c.Promises() {
		out[p.LUID] += p.Memory
	}
	return out
}
