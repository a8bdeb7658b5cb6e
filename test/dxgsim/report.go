package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/dxgsim/internal/dxg"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/dxgsim/internal/supervise"
)

// report is the --report JSON. The camelCase names handlesOpened,
// handlesClosed, handlesReleased, handlesOpen and misuse are read by
// test/e2e and test/engines: keep them.
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
	// HandlesClosed counts CLOSEADAPTER closes; HandlesReleased the
	// handles freed with their process's last dxg file (its close or the
	// process's exit), as the driver frees them. HandlesOpen is what is
	// left, HandlesOpened - HandlesClosed - HandlesReleased: handles a
	// process still held with the device open when dxgsim stopped, and
	// ones an ENUMADAPTERS3 overrun opened, all of them leaks.
	HandlesOpened   uint64 `json:"handlesOpened"`
	HandlesClosed   uint64 `json:"handlesClosed"`
	HandlesReleased uint64 `json:"handlesReleased"`
	HandlesOpen     uint64 `json:"handlesOpen"`
	// ProcessesCreated and ProcessesDestroyed are the driver's process
	// objects, each a host round trip on WSL (dxg.Stats).
	ProcessesCreated   uint64   `json:"processesCreated"`
	ProcessesDestroyed uint64   `json:"processesDestroyed"`
	Misuse             []string `json:"misuse"` // the first ones, bounded
	MisuseTotal        int      `json:"misuseTotal"`
	SupervisorErrors   int      `json:"supervisorErrors"`
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
		Profile:            o.cfg.Profile.Name,
		Faults:             faults,
		Command:            o.cmd,
		ExitStatus:         status,
		Calls:              st.Calls,
		Failures:           st.Failures,
		Passthrough:        sup.Passthrough(),
		HandlesOpened:      st.HandlesOpened,
		HandlesClosed:      st.HandlesClosed,
		HandlesReleased:    st.HandlesReleased,
		HandlesOpen:        st.HandlesOpened - st.HandlesClosed - st.HandlesReleased,
		ProcessesCreated:   st.ProcessesCreated,
		ProcessesDestroyed: st.ProcessesDestroyed,
		Misuse:             misuse,
		MisuseTotal:        total,
		SupervisorErrors:   sup.Errors(),
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
