package vendorstack

import (
	"errors"
	"fmt"
	"path/filepath"
)

// missing is the one line saying why an AMD adapter gets no ROCm here.
func (r ROCm) missing(who string) string {
	want := filepath.Join(r.Dir, "lib", rocdxgSoname)
	if r.Err != nil && !errors.Is(r.Err, ErrNoRocdxg) {
		return fmt.Sprintf("%s but librocdxg under %s is unusable: %v: ROCm in the container cannot use the GPU: reinstall librocdxg (github.com/ROCm/librocdxg) readable by everyone", who, r.Dir, r.Err)
	}
	return fmt.Sprintf("%s but there is no librocdxg at %s: ROCm in the container cannot use the GPU: install ROCm 7.1+ and librocdxg on the WSL host, or set rocm_dir in the config", who, want)
}

// Missing reports what the host lacks for the stacks of its adapters, one
// line each, for doctor and the hook's log: today an AMD GPU without a
// usable librocdxg.
func Missing(host []Adapter, r ROCm) []string {
	var out []string
	for _, a := range host {
		if a.rocmGPU() && r.Lib == "" {
			out = append(out, r.missing(fmt.Sprintf("AMD %s is present", a)))
		}
	}
	return out
}
