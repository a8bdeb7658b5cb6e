package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/dxgsim/internal/dxg"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/dxgsim/internal/supervise"
)

// report is the --report JSON. The camelCase names handlesOpened,
// handlesClosed, handlesOpen and misuse are read by test/e2e and
// test/engines: keep them.
type report struct {
	Profile    string   `json:"profile"`
	Faults     []string `json:"faults"`
	Command    []string `json:"command"`
	ExitStatus int      `json:"exitStatus"` // CMD's, before misuse turns 0 into 3
	// Calls and Failures count the emulated ioctls by name; Passthrough
	// counts dxg request numbers on other fds, which ran in the kernel.
	Calls       map[string]uint64 `json:"calls"`
	Failures    map[string]uint64 `json:"failures"`
	Passthrough uint64            `json:"passthrough"`
	// HandlesOpen is HandlesOpened - HandlesClosed: handles some process
	// never closed (all of them leaks by the time dxgsim exits).
	HandlesOpened    uint64   `json:"handlesOpened"`
	HandlesClosed    uint64   `json:"handlesClosed"`
	HandlesOpen      uint64   `json:"handlesOpen"`
	Misuse           []string `json:"misuse"` // the first ones, bounded
	MisuseTotal      int      `json:"misuseTotal"`
	SupervisorErrors int      `json:"supervisorErrors"`
}

func newReport(o options, status int, k *dxg.Kernel, sup *supervise.Supervisor) report {
	st := k.Stats()
	misuse, total := k.Misuse()
	if misuse == nil {
		misuse = []string{}
	}
	faults := o.faults
	if faults == nil {
		faults = []string{}
	}
	return report{
		Profile:          o.cfg.Profile.Name,
		Faults:           faults,
		Command:          o.cmd,
		ExitStatus:       status,
		Calls:            st.Calls,
		Failures:         st.Failures,
		Passthrough:      sup.Passthrough(),
		HandlesOpened:    st.HandlesOpened,
		HandlesClosed:    st.HandlesClosed,
		HandlesOpen:      st.HandlesOpened - st.HandlesClosed,
		Misuse:           misuse,
		MisuseTotal:      total,
		SupervisorErrors: sup.Errors(),
	}
}

func (r report) write(path string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write --report: %w", err)
	}
	return nil
}
