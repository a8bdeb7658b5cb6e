package gpumetrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/gpustats"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/printable"
)

// Sampler is what the collector reads: *gpustats.Poller, whose Sample is
// the latest of samples taken on its own period.
type Sampler interface {
	Sample() gpustats.Sample
}

// Collector reports one sample per scrape.
type Collector struct {
	s Sampler

	up, info, memTotal, memUsed, budget, running, busy, procMem, ioctls, duration, timestamp *prometheus.Desc
}

var adapterLabels = []string{"adapter", "luid"}

func labels(extra ...string) []string { return append(append([]string{}, adapterLabels...), extra...) }

// New returns a collector over s.
func New(s Sampler) *Collector {
	d := func(name, help string, l []string) *prometheus.Desc {
		return prometheus.NewDesc("wsl_gpu_"+name, help, l, nil)
	}
	return &Collector{
		s:        s,
		up:       d("up", "1 if every statistics query of the adapter answered in the latest sample, else 0.", labels()),
		info:     d("adapter_info", "Adapter identity; always 1.", labels("vendor", "description", "driver_version")),
		memTotal: d("memory_total_bytes", "Size of the adapter's memory segments by group (local: its own VRAM; nonlocal: system memory it maps).", labels("group")),
		memUsed:  d("memory_used_bytes", "Bytes resident in the adapter's segments by group, every process and Windows itself included.", labels("group")),
		budget:   d("memory_budget_bytes", "The OS budget for one process in the adapter's main segment group.", labels("group")),
		running:  d("engine_running_seconds_total", "Time the engine node has been busy since the adapter started.", labels("node", "engine", "kind")),
		busy:     d("engine_busy_ratio", "Busiest node of each engine kind over the last sampling interval (0..1).", labels("kind")),
		procMem:  d("process_memory_bytes", "Memory a Linux process holding /dev/dxg uses on the adapter.", labels("group", "pid", "comm", "container", "pod")),
		// The names say scrape from when every scrape took a sample;
		// dashboards use them.
		ioctls:    prometheus.NewDesc("wsl_gpu_scrape_ioctls", "dxg ioctls the latest sample made.", nil, nil),
		duration:  prometheus.NewDesc("wsl_gpu_scrape_duration_seconds", "Time the latest sample's queries took.", nil, nil),
		timestamp: prometheus.NewDesc("wsl_gpu_sample_timestamp_seconds", "Unix time of the sample reported; it advances every sampling interval.", nil, nil),
	}
}

// Describe sends every descriptor.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.up, c.info, c.memTotal, c.memUsed, c.budget, c.running, c.busy, c.procMem, c.ioctls, c.duration, c.timestamp} {
		ch <- d
	}
}

// Collect sends the metrics of the sampler's sample.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.s.Sample()
	m := func(d *prometheus.Desc, t prometheus.ValueType, v float64, l ...string) {
		for i := range l {
			l[i] = printable.String(l[i], printable.Label)
		}
		ch <- prometheus.MustNewConstMetric(d, t, v, l...)
	}
	g := func(d *prometheus.Desc, v float64, l ...string) { m(d, prometheus.GaugeValue, v, l...) }
	for _, a := range s.Adapters {
		idx := strconv.Itoa(a.Index)
		up := 1.0
		if a.Error != "" {
			up = 0
		}
		g(c.up, up, idx, a.LUID)
		g(c.info, 1, idx, a.LUID, a.Vendor, a.Description, a.DriverVersion)
		if a.Error != "" {
			continue
		}
		main := "local"
		if a.Local.Total == 0 {
			main = "nonlocal"
		}
		for _, m := range []struct {
			group string
			mem   gpustats.Memory
		}{{"local", a.Local}, {"nonlocal", a.NonLocal}} {
			if m.mem.Total == 0 {
				continue
			}
			g(c.memTotal, float64(m.mem.Total), idx, a.LUID, m.group)
			g(c.memUsed, float64(m.mem.Used), idx, a.LUID, m.group)
		}
		if a.Budget > 0 {
			g(c.budget, float64(a.Budget), idx, a.LUID, main)
		}
		for _, e := range a.Engines {
			m(c.running, prometheus.CounterValue, e.RunningSeconds, idx, a.LUID, strconv.Itoa(e.Node), e.Name, e.Kind)
		}
		for kind, v := range gpustats.KindBusy(a) {
			g(c.busy, v, idx, a.LUID, kind)
		}
		for _, p := range a.Processes {
			pid := strconv.Itoa(p.PID)
			g(c.procMem, float64(p.Local), idx, a.LUID, "local", pid, p.Comm, p.Container, p.Pod)
			g(c.procMem, float64(p.NonLocal), idx, a.LUID, "nonlocal", pid, p.Comm, p.Container, p.Pod)
		}
	}
	g(c.ioctls, float64(s.Ioctls))
	g(c.duration, s.Seconds)
	if !s.Time.IsZero() {
		g(c.timestamp, float64(s.Time.UnixNano())/1e9)
	}
}
