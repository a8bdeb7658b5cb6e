package gpumetrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/printable"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/usage/gpustats"
)

// Sampler is what the collector reads: *gpustats.Poller, whose Sample is
// the latest of samples taken on its own period.
type Sampler interface {
	Sample() gpustats.Sample
}

// Collector reports one sample per scrape.
type Collector struct {
	s Sampler

	up, info, memTotal, memUsed, budget, running, busy, containerMem, ioctls, duration, timestamp *prometheus.Desc
}

// adapterLabels name an adapter's series: its identity (package adapterid),
// which a WSL boot (a new LUID) or a driver update does not change, so a
// series keeps its history. The LUID and index are attributes, on the
// _info metric.
var adapterLabels = []string{"gpu"}

func labels(extra ...string) []string { return append(append([]string{}, adapterLabels...), extra...) }

// New returns a collector over s.
func New(s Sampler) *Collector {
	d := func(name, help string, l []string) *prometheus.Desc {
		return prometheus.NewDesc("wsl_gpu_"+name, help, l, nil)
	}
	return &Collector{
		s:        s,
		up:       d("up", "1 if every statistics query of the adapter answered in the latest sample, else 0.", labels()),
		info:     d("adapter_info", "The adapter's attributes (LUID and index change at every WSL boot); always 1.", labels("index", "luid", "vendor", "kind", "description", "driver_version")),
		memTotal: d("memory_total_bytes", "Size of the adapter's memory segments by group (local: its own VRAM; nonlocal: system memory it maps).", labels("group")),
		memUsed:  d("memory_used_bytes", "Bytes resident in the adapter's segments by group, every process and Windows itself included.", labels("group")),
		budget:   d("memory_budget_bytes", "The OS budget for one process in the adapter's main segment group.", labels("group")),
		running:  d("engine_running_seconds_total", "Time the engine node has been busy since the adapter started.", labels("node", "engine", "kind")),
		busy:     d("engine_busy_ratio", "Busiest node of each engine kind over the last sampling interval (0..1).", labels("kind")),
		containerMem: d("container_memory_bytes", "Memory the processes of one container use on the adapter, by group; namespace, pod and container empty for processes in no container.",
			labels("group", "namespace", "pod", "container")),
		// The names say scrape from when every scrape took a sample;
		// dashboards use them.
		ioctls:    prometheus.NewDesc("wsl_gpu_scrape_ioctls", "dxg ioctls the latest sample made.", nil, nil),
		duration:  prometheus.NewDesc("wsl_gpu_scrape_duration_seconds", "Time the latest sample's queries took.", nil, nil),
		timestamp: prometheus.NewDesc("wsl_gpu_sample_timestamp_seconds", "Unix time of the sample reported; it advances every sampling interval.", nil, nil),
	}
}

// Describe sends every descriptor.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.up, c.info, c.memTotal, c.memUsed, c.budget, c.running, c.busy, c.containerMem, c.ioctls, c.duration, c.timestamp} {
		ch <- d
	}
}

// Collect sends the metrics of the sampler's sample.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.s.Sample()
	m := func(d *prometheus.Desc, t prometheus.ValueType, v float64, l ...string) { send(ch, d, t, v, l...) }
	g := func(d *prometheus.Desc, v float64, l ...string) { m(d, prometheus.GaugeValue, v, l...) }
	for _, a := range s.Adapters {
		id := a.ID
		up := 1.0
		if a.Error != "" {
			up = 0
		}
		g(c.up, up, id)
		g(c.info, 1, id, strconv.Itoa(a.Index), a.LUID, a.Vendor, a.Kind, a.Description, a.DriverVersion)
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
			g(c.memTotal, float64(m.mem.Total), id, m.group)
			g(c.memUsed, float64(m.mem.Used), id, m.group)
		}
		if a.Budget > 0 {
			g(c.budget, float64(a.Budget), id, main)
		}
		for _, e := range a.Engines {
			m(c.running, prometheus.CounterValue, e.RunningSeconds, id, strconv.Itoa(e.Node), e.Name, e.Kind)
		}
		for kind, v := range gpustats.KindBusy(a) {
			g(c.busy, v, id, kind)
		}
		for _, u := range ByContainer(a.Processes) {
			g(c.containerMem, float64(u.Local), id, "local", u.Namespace, u.Pod, u.Container)
			g(c.containerMem, float64(u.NonLocal), id, "nonlocal", u.Namespace, u.Pod, u.Container)
		}
	}
	g(c.ioctls, float64(s.Ioctls))
	g(c.duration, s.Seconds)
	if !s.Time.IsZero() {
		g(c.timestamp, float64(s.Time.UnixNano())/1e9)
	}
}

// ContainerUse is the memory of one container's processes on an adapter.
type ContainerUse struct {
	// Namespace and Pod are the Kubernetes pod's, "" outside Kubernetes;
	// Container the container's name where it is known, else its id, ""
	// for processes in no container.
	Namespace, Pod, Container string
	Local, NonLocal           uint64
}

// ByContainer sums processes by container, so that series are one per
// container, not one per pid: a pid is a new series at every restart.
func ByContainer(ps []gpustats.ProcessUse) []ContainerUse {
	var out []ContainerUse
	at := map[[3]string]int{}
	for _, p := range ps {
		k := [3]string{p.Namespace, p.PodName, p.ContainerName}
		if k[1] == "" && k[2] == "" {
			k = [3]string{"", "", p.Container}
		}
		i, ok := at[k]
		if !ok {
			i = len(out)
			at[k] = i
			out = append(out, ContainerUse{Namespace: k[0], Pod: k[1], Container: k[2]})
		}
		out[i].Local += p.Local
		out[i].NonLocal += p.NonLocal
	}
	return out
}

// send sends one series with its label values made printable and
// distinct (printable.Unique: values alike in their first 128 bytes, or
// alike once escaped, stay apart), so no value a pod's owner or a
// process picks makes two series the same, which fails the whole
// scrape. A series that still cannot be made goes as an invalid metric:
// the server answers the others (metricsserver serves what gathers).
func send(ch chan<- prometheus.Metric, d *prometheus.Desc, t prometheus.ValueType, v float64, l ...string) {
	for i := range l {
		l[i] = printable.Unique(l[i], printable.Label)
	}
	m, err := prometheus.NewConstMetric(d, t, v, l...)
	if err != nil {
		m = prometheus.NewInvalidMetric(d, err)
	}
	ch <- m
}
