package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/cli"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/printable"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/usage/containernames"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/usage/gpustats"
)

// topKinds are the engine kinds top shows, in column order.
var topKinds = []struct{ kind, title string }{
	{"3d", "3D"}, {"compute", "COMPUTE"}, {"copy", "COPY"}, {"video_decode", "VDEC"}, {"video_encode", "VENC"},
}

func topCommand() command {
	return command{name: "top",
		summary: "Show GPU memory, engine busy % and processes per adapter.\nRedrawn every --interval on a terminal, printed once on a pipe.",
		define: func(fs *flag.FlagSet) runFunc {
			interval := fs.Duration("interval", time.Second, "time between samples")
			once := fs.Bool("once", false, "print one view (two samples, --interval apart) and exit")
			asJSON := fs.Bool("json", false, "print JSON (implies --once)")
			return func(ctx context.Context, e env, _ []string) error {
				if *interval < 10*time.Millisecond {
					return cli.CmdUsagef("top", "--interval must be at least 10ms")
				}
				return runTop(ctx, e.cfg, *interval, *once, *asJSON, e.stdout)
			}
		}}
}

func runTop(ctx context.Context, cfg config.Config, interval time.Duration, once, asJSON bool, stdout io.Writer) error {
	s, err := gpustats.Open(gpustats.Options{Device: cfg.DxgDevice, DriversDir: cfg.DriversDir, Names: containernames.OnThisHost()})
	if err != nil {
		return fmt.Errorf("top: %w", err)
	}
	defer s.Close()
	s.Sample() // the baseline busy ratios are measured from
	// A pipe or file gets one view: redrawing needs a terminal.
	live := !once && !asJSON && isTerminal(stdout)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
		sample := s.Sample()
		if asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(sample)
		}
		if live {
			fmt.Fprint(stdout, "\x1b[H\x1b[2J")
		}
		printTop(stdout, sample, interval)
		if !live {
			return nil
		}
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

func printTop(w io.Writer, s gpustats.Sample, interval time.Duration) {
	fmt.Fprintf(w, "wsl-gpu-ctl top  %s  interval %s  %d ioctls\n\n", s.Time.Format("15:04:05"), interval, s.Ioctls)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "GPU\tVENDOR\tDESCRIPTION\tMEMORY USED / TOTAL\tBUDGET"
	for _, k := range topKinds {
		head += "\t" + k.title
	}
	fmt.Fprintln(tw, head)
	for _, a := range s.Adapters {
		if a.Error != "" {
			fmt.Fprintf(tw, "%d\t%s\t%s\tunhealthy: %s\n", a.Index, cell(a.Vendor), cell(a.Description), line(a.Error))
			continue
		}
		mem := a.Local
		group := "local"
		if mem.Total == 0 {
			mem, group = a.NonLocal, "shared"
		}
		// No budget is an unanswered call, not a budget of 0.
		budget := "-"
		if a.Budget > 0 {
			budget = humanBytes(a.Budget)
		}
		row := fmt.Sprintf("%d\t%s\t%s\t%s / %s %s\t%s", a.Index, cell(a.Vendor), cell(a.Description),
			humanBytes(mem.Used), humanBytes(mem.Total), group, budget)
		busy := gpustats.KindBusy(a)
		for _, k := range topKinds {
			if v, ok := busy[k.kind]; ok {
				row += fmt.Sprintf("\t%5.1f%%", v*100)
			} else {
				row += "\t-"
			}
		}
		fmt.Fprintln(tw, row)
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GPU\tPID\tCOMMAND\tCONTAINER\tPOD\tLOCAL\tSHARED")
	for _, a := range s.Adapters {
		for _, p := range a.Processes {
			fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%s\n", a.Index, p.PID, cell(p.Comm), cell(containerOf(p.Process)), cell(podOf(p.Process)),
				humanBytes(p.Local), humanBytes(p.NonLocal))
		}
	}
	tw.Flush()
	for _, a := range s.Adapters {
		for _, e := range a.Engines {
			if e.Error != "" {
				fmt.Fprintf(w, "warning: GPU %d engine %s: %s\n", a.Index, cell(e.Name), line(e.Error))
			}
		}
		for _, n := range a.Notes {
			fmt.Fprintf(w, "note: GPU %d: %s\n", a.Index, line(n))
		}
	}
	if n := unattributedLine(s); n != "" {
		fmt.Fprintln(w, n)
	}
}

// unattributedLine sums up, in one line, the processes whose use cannot
// be read: a line per process and GPU scrolled the table off a terminal
// with a few containers running.
func unattributedLine(s gpustats.Sample) string {
	by := map[string]map[int]bool{}
	for _, a := range s.Adapters {
		for _, u := range a.Unattributed {
			if by[u.Reason] == nil {
				by[u.Reason] = map[int]bool{}
			}
			by[u.Reason][u.PID] = true
		}
	}
	var parts []string
	total := 0
	for _, r := range []struct{ reason, what string }{
		{gpustats.ReasonNotFound, "the WSL kernel cannot attribute (another pid namespace, or a kernel without the pid lookup)"},
		{gpustats.ReasonAmbiguous, "sharing their namespace pid with another (every container's pid 1)"},
		{gpustats.ReasonError, "whose query failed"},
	} {
		if n := len(by[r.reason]); n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, r.what))
			total += n
		}
	}
	if total == 0 {
		return ""
	}
	return fmt.Sprintf("note: %d GPU processes not counted: %s (--json lists them)", total, strings.Join(parts, ", "))
}

// containerOf is the container's name where an engine or the kubelet
// said it, its id otherwise.
func containerOf(p gpustats.Process) string {
	if p.ContainerName != "" {
		return p.ContainerName
	}
	return orDash(p.Container)
}

// podOf is namespace/name where the kubelet said it, the pod's UID
// otherwise.
func podOf(p gpustats.Process) string {
	if p.PodName != "" {
		return p.Namespace + "/" + p.PodName
	}
	return orDash(p.Pod)
}

// cell and line make what top shows of names it did not choose (process
// names, which any process sets itself, and what the driver reports)
// safe for a terminal: no escape sequences, no tab to break the columns.
func cell(s string) string { return printable.String(s, printable.Label) }
func line(s string) string { return printable.String(s, printable.Line) }

// humanBytes prints binary units with one decimal: 2.6 GiB.
func humanBytes(b uint64) string {
	if b == 0 {
		return "0"
	}
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	v, i := float64(b), 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%d B", b)
	}
	return strings.TrimSuffix(fmt.Sprintf("%.1f", v), ".0") + " " + units[i]
}
