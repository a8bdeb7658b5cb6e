package gpumetrics

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/gpustats"
)

type fixed gpustats.Sample

func (f fixed) Sample() gpustats.Sample { return gpustats.Sample(f) }

func ratio(v float64) *float64 { return &v }

func sample() gpustats.Sample {
	return gpustats.Sample{Ioctls: 14, Seconds: 0.002, Time: time.Unix(1700000000, 500e6), Adapters: []gpustats.Adapter{
		{Index: 0, LUID: "0x1a1d77", Vendor: "intel", Error: "adapter statistics: LX_DXQUERYSTATISTICS: no such device"},
		{Index: 1, LUID: "0x4486d1", Vendor: "nvidia", Description: "NVIDIA GeForce RTX 3060 Laptop GPU", DriverVersion: "32.0.15.6094",
			Local: gpustats.Memory{Total: 6 << 30, Used: 2662 << 20}, NonLocal: gpustats.Memory{Total: 8 << 30, Used: 306 << 20}, Budget: 5632 << 20,
			Engines: []gpustats.Engine{
				{Node: 1, Name: "Copy", Kind: "copy", RunningSeconds: 2.4, Busy: ratio(0.4)},
				{Node: 4, Name: "Compute_0", Kind: "compute", RunningSeconds: 7.5, Busy: ratio(0.75)},
				{Node: 5, Name: "Cuda", Kind: "compute", RunningSeconds: 0, Busy: ratio(0)},
			},
			Processes: []gpustats.ProcessUse{{Process: gpustats.Process{PID: 4242, Comm: "gpu-worker", Container: "4f3c2b1a0e9d"}, Local: 2 << 30, NonLocal: 256 << 20}},
		},
	}}
}

func TestMetricsAreLintCleanAndCarryTheSample(t *testing.T) {
	c := New(fixed(sample()))
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	want := `
# HELP wsl_gpu_engine_busy_ratio Busiest node of each engine kind over the last sampling interval (0..1).
# TYPE wsl_gpu_engine_busy_ratio gauge
wsl_gpu_engine_busy_ratio{adapter="1",kind="compute",luid="0x4486d1"} 0.75
wsl_gpu_engine_busy_ratio{adapter="1",kind="copy",luid="0x4486d1"} 0.4
# HELP wsl_gpu_memory_used_bytes Bytes resident in the adapter's segments by group, every process and Windows itself included.
# TYPE wsl_gpu_memory_used_bytes gauge
wsl_gpu_memory_used_bytes{adapter="1",group="local",luid="0x4486d1"} 2.791309312e+09
wsl_gpu_memory_used_bytes{adapter="1",group="nonlocal",luid="0x4486d1"} 3.20864256e+08
# HELP wsl_gpu_up 1 if every statistics query of the adapter answered in the latest sample, else 0.
# TYPE wsl_gpu_up gauge
wsl_gpu_up{adapter="0",luid="0x1a1d77"} 0
wsl_gpu_up{adapter="1",luid="0x4486d1"} 1
# HELP wsl_gpu_process_memory_bytes Memory a Linux process holding /dev/dxg uses on the adapter.
# TYPE wsl_gpu_process_memory_bytes gauge
wsl_gpu_process_memory_bytes{adapter="1",comm="gpu-worker",container="4f3c2b1a0e9d",group="local",luid="0x4486d1",pid="4242",pod=""} 2.147483648e+09
wsl_gpu_process_memory_bytes{adapter="1",comm="gpu-worker",container="4f3c2b1a0e9d",group="nonlocal",luid="0x4486d1",pid="4242",pod=""} 2.68435456e+08
# HELP wsl_gpu_sample_timestamp_seconds Unix time of the sample reported; it advances every sampling interval.
# TYPE wsl_gpu_sample_timestamp_seconds gauge
wsl_gpu_sample_timestamp_seconds 1.7000000005e+09
# HELP wsl_gpu_scrape_duration_seconds Time the latest sample's queries took.
# TYPE wsl_gpu_scrape_duration_seconds gauge
wsl_gpu_scrape_duration_seconds 0.002
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "wsl_gpu_engine_busy_ratio", "wsl_gpu_memory_used_bytes", "wsl_gpu_up", "wsl_gpu_process_memory_bytes",
		"wsl_gpu_sample_timestamp_seconds", "wsl_gpu_scrape_duration_seconds"); err != nil {
		t.Error(err)
	}
}

func TestRegistersWithoutConflicts(t *testing.T) {
	r := prometheus.NewPedanticRegistry()
	if err := r.Register(New(fixed(sample()))); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Gather(); err != nil {
		t.Fatal(err)
	}
	_ = promlint.New
}

// TestHostileProcessNamesAreSanitized: anyone who can open /dev/dxg names
// their process (prctl, /proc/self/comm): invalid UTF-8 made client_golang
// refuse the label value and escape sequences went out unescaped. The
// scrape must succeed with the name made printable.
func TestHostileProcessNamesAreSanitized(t *testing.T) {
	s := sample()
	s.Adapters[1].Processes[0].Comm = "\xff\xfe\x1b[31mred\u009b\x7f"
	s.Adapters[1].Description = "RTX\x1b]0;owned\x07"
	r := prometheus.NewPedanticRegistry()
	r.MustRegister(New(fixed(s)))
	mfs, err := r.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	got := map[string][]string{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				k := mf.GetName() + " " + l.GetName()
				got[k] = append(got[k], l.GetValue())
			}
		}
	}
	for k, want := range map[string]string{
		"wsl_gpu_process_memory_bytes comm": "\ufffd\ufffd\\x1b[31mred\\x9b\\x7f",
		"wsl_gpu_adapter_info description":  "RTX\\x1b]0;owned\\x07",
	} {
		if !slices.Contains(got[k], want) {
			t.Errorf("%s = %q, want %q among them", k, got[k], want)
		}
	}
}
