package gpumetrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Allocation is one adapter held by one container, as the kubelet says
// (package podresources lists them).
type Allocation struct {
	GPU, Namespace, Pod, Container, Source string
}

// Allocations reports wsl_gpu_allocation_info: which pod and container
// holds each adapter, by the device plugin or a DRA claim, joined to the
// adapter's series by gpu. list is asked at most every refresh; a scrape
// in between gets the last answer.
type Allocations struct {
	list    func(context.Context) ([]Allocation, error)
	refresh time.Duration
	desc    *prometheus.Desc

	mu   sync.Mutex
	at   time.Time
	last []Allocation
	err  error
}

// NewAllocations returns the collector over list.
func NewAllocations(list func(context.Context) ([]Allocation, error), refresh time.Duration) *Allocations {
	return &Allocations{list: list, refresh: refresh,
		desc: prometheus.NewDesc("wsl_gpu_allocation_info", "A container that holds the adapter, through the device plugin (source: the resource) or a DRA claim (source: claim NAMESPACE/NAME); always 1.",
			[]string{"gpu", "namespace", "pod", "container", "source"}, nil)}
}

// Describe sends the descriptor.
func (a *Allocations) Describe(ch chan<- *prometheus.Desc) { ch <- a.desc }

// Collect sends one series per allocation; when the kubelet cannot be
// asked, none (an invalid metric would fail the whole scrape).
func (a *Allocations) Collect(ch chan<- prometheus.Metric) {
	a.mu.Lock()
	if a.at.IsZero() || time.Since(a.at) >= a.refresh {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		a.last, a.err = a.list(ctx)
		cancel()
		a.at = time.Now()
	}
	allocs := a.last
	a.mu.Unlock()
	for _, al := range allocs {
		send(ch, a.desc, prometheus.GaugeValue, 1, al.GPU, al.Namespace, al.Pod, al.Container, al.Source)
	}
}

// ClaimMemory is the memory a DRA claim was promised on an adapter.
type ClaimMemory struct {
	GPU, Namespace, Claim string
	Bytes                 int64
}

// Claims reports wsl_gpu_claim_memory_bytes from list, read at each
// scrape: what each prepared claim asked of each adapter (a scheduling
// promise, which Windows does not enforce), to set beside
// wsl_gpu_container_memory_bytes, what is used. The DRA driver serves it.
type Claims struct {
	list func() []ClaimMemory
	desc *prometheus.Desc
}

// NewClaims returns the collector over list.
func NewClaims(list func() []ClaimMemory) *Claims {
	return &Claims{list: list, desc: prometheus.NewDesc("wsl_gpu_claim_memory_bytes",
		"Video memory a prepared DRA claim was promised on the adapter (its share, or all of it when it holds the adapter alone); a scheduling promise, not a limit.",
		[]string{"gpu", "namespace", "claim"}, nil)}
}

// Describe sends the descriptor.
func (c *Claims) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect sends one series per claim and adapter.
func (c *Claims) Collect(ch chan<- prometheus.Metric) {
	sums := map[[3]string]int64{}
	var keys [][3]string
	for _, m := range c.list() {
		k := [3]string{m.GPU, m.Namespace, m.Claim}
		if _, ok := sums[k]; !ok {
			keys = append(keys, k)
		}
		sums[k] += m.Bytes
	}
	for _, k := range keys {
		send(ch, c.desc, prometheus.GaugeValue, float64(sums[k]), k[0], k[1], k[2])
	}
}
