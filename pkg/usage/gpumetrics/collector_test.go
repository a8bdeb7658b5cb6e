package gpumetrics

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/usage/gpustats"
)

type fixed gpustats.Sample

func (f fixed) Sample() gpustats.Sample { return gpustats.Sample(f) }

func ratio(v float64) *float64 { return &v }

func sample() gpustats.Sample {
	return gpustats.Sample{Ioctls: 14, Seconds: 0.002, Time: time.Unix(1700000000, 500e6), Adapters: []gpustats.Adapter{
		{ID: "intel-9a49-22d817aa-0", Kind: "gpu", Index: 0, LUID: "0x1a1d77", Vendor: "intel", Error: "adapter statistics: LX_DXQUERYSTATISTICS: no such device"},
		{ID: "nvidia-2520-3a5c17aa-0", Kind: "gpu", Index: 1, LUID: "0x4486d1", Vendor: "nvidia", Description: "NVIDIA GeForce RTX 3060 Laptop GPU", DriverVersion: "32.0.15.6094",
			Local: gpustats.Memory{Total: 6 << 30, Used: 2662 << 20}, NonLocal: gpustats.Memory{Total: 8 << 30, Used: 306 << 20}, Budget: 5632 << 20,
			Engines: []gpustats.Engine{
				{Node: 1, Name: "Copy", Kind: "copy", RunningSeconds: 2.4, Busy: ratio(0.4)},
				{Node: 4, Name: "Compute_0", Kind: "compute", RunningSeconds: 7.5, Busy: ratio(0.75)},
				{Node: 5, Name: "Cuda", Kind: "compute", RunningSeconds: 0, Busy: ratio(0)},
			},
			Processes: []gpustats.ProcessUse{
				{Process: gpustats.Process{PID: 4242, Comm: "gpu-worker", Container: "4f3c2b1a0e9d"}, Local: 2 << 30, NonLocal: 256 << 20},
				// Two processes of one pod's container: one series.
				{Process: gpustats.Process{PID: 77, Comm: "python", Container: "9a8b7c6d5e4f", Pod: "u-1", Namespace: "ml", PodName: "trainer-0", ContainerName: "main"}, Local: 1 << 30},
				{Process: gpustats.Process{PID: 78, Comm: "python", Container: "9a8b7c6d5e4f", Pod: "u-1", Namespace: "ml", PodName: "trainer-0", ContainerName: "main"}, Local: 1 << 30, NonLocal: 1 << 20},
			},
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
# HELP wsl_gpu_adapter_info The adapter's attributes (LUID and index change at every WSL boot); always 1.
# TYPE wsl_gpu_adapter_info gauge
wsl_gpu_adapter_info{description="",driver_version="",gpu="intel-9a49-22d817aa-0",index="0",kind="gpu",luid="0x1a1d77",vendor="intel"} 1
wsl_gpu_adapter_info{description="NVIDIA GeForce RTX 3060 Laptop GPU",driver_version="32.0.15.6094",gpu="nvidia-2520-3a5c17aa-0",index="1",kind="gpu",luid="0x4486d1",vendor="nvidia"} 1
# HELP wsl_gpu_engine_busy_ratio Busiest node of each engine kind over the last sampling interval (0..1).
# TYPE wsl_gpu_engine_busy_ratio gauge
wsl_gpu_engine_busy_ratio{gpu="nvidia-2520-3a5c17aa-0",kind="compute"} 0.75
wsl_gpu_engine_busy_ratio{gpu="nvidia-2520-3a5c17aa-0",kind="copy"} 0.4
# HELP wsl_gpu_memory_used_bytes Bytes resident in the adapter's segments by group, every process and Windows itself included.
# TYPE wsl_gpu_memory_used_bytes gauge
wsl_gpu_memory_used_bytes{gpu="nvidia-2520-3a5c17aa-0",group="local"} 2.791309312e+09
wsl_gpu_memory_used_bytes{gpu="nvidia-2520-3a5c17aa-0",group="nonlocal"} 3.20864256e+08
# HELP wsl_gpu_up 1 if every statistics query of the adapter answered in the latest sample, else 0.
# TYPE wsl_gpu_up gauge
wsl_gpu_up{gpu="intel-9a49-22d817aa-0"} 0
wsl_gpu_up{gpu="nvidia-2520-3a5c17aa-0"} 1
# HELP wsl_gpu_container_memory_bytes Memory the processes of one container use on the adapter, by group; namespace, pod and container empty for processes in no container.
# TYPE wsl_gpu_container_memory_bytes gauge
wsl_gpu_container_memory_bytes{container="4f3c2b1a0e9d",gpu="nvidia-2520-3a5c17aa-0",group="local",namespace="",pod=""} 2.147483648e+09
wsl_gpu_container_memory_bytes{container="4f3c2b1a0e9d",gpu="nvidia-2520-3a5c17aa-0",group="nonlocal",namespace="",pod=""} 2.68435456e+08
wsl_gpu_container_memory_bytes{container="main",gpu="nvidia-2520-3a5c17aa-0",group="local",namespace="ml",pod="trainer-0"} 2.147483648e+09
wsl_gpu_container_memory_bytes{container="main",gpu="nvidia-2520-3a5c17aa-0",group="nonlocal",namespace="ml",pod="trainer-0"} 1.048576e+06
# HELP wsl_gpu_sample_timestamp_seconds Unix time of the sample reported; it advances every sampling interval.
# TYPE wsl_gpu_sample_timestamp_seconds gauge
wsl_gpu_sample_timestamp_seconds 1.7000000005e+09
# HELP wsl_gpu_scrape_duration_seconds Time the latest sample's queries took.
# TYPE wsl_gpu_scrape_duration_seconds gauge
wsl_gpu_scrape_duration_seconds 0.002
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "wsl_gpu_adapter_info", "wsl_gpu_engine_busy_ratio", "wsl_gpu_memory_used_bytes", "wsl_gpu_up", "wsl_gpu_container_memory_bytes",
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
// scrape must succeed with the name made printable, tagged with the
// hash of the raw name (printable.Unique: an escaped name must not meet
// another that spells the escape).
func TestHostileProcessNamesAreSanitized(t *testing.T) {
	s := sample()
	s.Adapters[1].Processes[1].ContainerName = "\xff\xfe\x1b[31mred\u009b\x7f"
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
		"wsl_gpu_container_memory_bytes container": "\ufffd\ufffd\\x1b[31mred\\x9b\\x7f",
		"wsl_gpu_adapter_info description":         "RTX\\x1b]0;owned\\x07",
	} {
		tagged := regexp.MustCompile(`^` + regexp.QuoteMeta(want) + `~[0-9a-f]{16}$`)
		if !slices.ContainsFunc(got[k], tagged.MatchString) {
			t.Errorf("%s = %q, want %q and its tag among them", k, got[k], want)
		}
	}
}

func TestAllocations(t *testing.T) {
	calls := 0
	c := NewAllocations(func(context.Context) ([]Allocation, error) {
		calls++
		return []Allocation{{GPU: "nvidia-2520-3a5c17aa-0", Namespace: "ml", Pod: "cuda-0", Container: "main", Source: "nvidia.com/gpu"}}, nil
	}, time.Hour)
	want := `
# HELP wsl_gpu_allocation_info A container that holds the adapter, through the device plugin (source: the resource) or a DRA claim (source: claim NAMESPACE/NAME); always 1.
# TYPE wsl_gpu_allocation_info gauge
wsl_gpu_allocation_info{container="main",gpu="nvidia-2520-3a5c17aa-0",namespace="ml",pod="cuda-0",source="nvidia.com/gpu"} 1
`
	for range 2 {
		if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
			t.Error(err)
		}
	}
	if calls != 1 {
		t.Errorf("asked the kubelet %d times in one refresh period", calls)
	}
}

// Two requests of one claim on one adapter are one series: the claim's
// promise there.
func TestClaims(t *testing.T) {
	c := NewClaims(func() []ClaimMemory {
		return []ClaimMemory{
			{GPU: "nvidia-2520-3a5c17aa-0", Namespace: "ml", Claim: "a", Bytes: 1 << 30},
			{GPU: "nvidia-2520-3a5c17aa-0", Namespace: "ml", Claim: "a", Bytes: 1 << 30},
			{GPU: "nvidia-2520-3a5c17aa-0", Namespace: "dev", Claim: "b", Bytes: 3 << 30},
		}
	})
	want := `
# HELP wsl_gpu_claim_memory_bytes Video memory a prepared DRA claim was promised on the adapter (its share, or all of it when it holds the adapter alone); a scheduling promise, not a limit.
# TYPE wsl_gpu_claim_memory_bytes gauge
wsl_gpu_claim_memory_bytes{claim="a",gpu="nvidia-2520-3a5c17aa-0",namespace="ml"} 2.147483648e+09
wsl_gpu_claim_memory_bytes{claim="b",gpu="nvidia-2520-3a5c17aa-0",namespace="dev"} 3.221225472e+09
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
