package doctor

import (
	"path/filepath"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
)

// TestROCm: an AMD GPU without librocdxg in the host's ROCm install gets
// its driver folder and still cannot run ROCm: doctor says so, with the
// fix; with librocdxg there it is ok; a host without AMD is not asked.
func TestROCm(t *testing.T) {
	const amdFolder = "u0198975.inf_amd64_cab3843582148687"
	amd := func(h *host) {
		h.enum.Adapters = append(h.enum.Adapters, dxcore.Adapter{Index: 2, LUID: dxcore.LUID{Low: 0x77}, WDDMVersion: 3000,
			PCI: dxcore.PCIIDs{Vendor: 0x1002, Device: 0x744c}, Description: "AMD Radeon RX 7900 XTX", DriverStorePath: store + amdFolder})
		h.write(filepath.Join(h.opt.DriversDir, amdFolder, "amdxc64.so"), "elf", 0o555)
	}
	tests := []struct {
		name   string
		setup  func(h *host)
		status Status // "" for no rocm line at all
		detail string
	}{
		{name: "no AMD adapter", setup: func(*host) {}},
		{name: "AMD without librocdxg", setup: amd, status: Warn, detail: "no librocdxg at"},
		{name: "AMD with librocdxg", setup: func(h *host) {
			amd(h)
			h.write(filepath.Join(h.opt.ROCmDir, "lib/librocdxg.so.1"), "elf", 0o755)
		}, status: OK, detail: "librocdxg at"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost(t)
			h.opt.ROCmDir = filepath.Join(h.dir, "opt/rocm")
			tt.setup(h)
			rep := h.run()
			if tt.status == "" {
				wantNone(t, rep, "rocm")
				return
			}
			fix := ""
			if tt.status == Warn {
				fix = "install ROCm 7.1+"
			}
			want(t, rep, "rocm", tt.status, tt.detail, fix)
		})
	}
}
