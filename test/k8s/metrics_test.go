package k8s

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/k8s/cluster"
)

const (
	rtx = "nvidia-2520-3a5c17aa-0" // the laptop's RTX 3060, by its identity
	// The chart's rules and dashboard, as the chart ships them.
	rulesFile     = chart + "/files/prometheus-rules.yaml"
	dashboardFile = chart + "/files/dashboard.json"
)

// prometheus is a Prometheus (3.16, hack/prometheus) scraping the chart's metrics
// Service by Kubernetes service discovery, as users run one, from the
// laptop's network (the only node whose pods it can reach here).
type prometheus struct {
	url string
	p   *cluster.Proc
}

func startPrometheus(t *testing.T, c *cluster.Cluster) *prometheus {
	t.Helper()
	laptop := c.Node("laptop")
	// Its account may read what service discovery reads, nothing else.
	c.Apply(`apiVersion: v1
kind: ServiceAccount
metadata: {name: prometheus, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: test-prometheus}
rules:
- apiGroups: [""]
  resources: [pods, services, endpoints]
  verbs: [get, list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: test-prometheus}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: test-prometheus}
subjects: [{kind: ServiceAccount, name: prometheus, namespace: default}]
`)
	t.Cleanup(func() {
		c.Kubectl("delete", "clusterrolebinding,clusterrole", "test-prometheus", "--ignore-not-found")
		c.Kubectl("delete", "serviceaccount", "prometheus", "--ignore-not-found")
	})
	dir := t.TempDir()
	token := c.MustKubectl("create", "token", "prometheus", "--duration", "1h")
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	rules, err := filepath.Abs(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`global: {scrape_interval: 2s, evaluation_interval: 2s}
rule_files: [%q]
scrape_configs:
- job_name: wsl-gpu-hook
  kubernetes_sd_configs:
  - role: endpointslice
    api_server: %q
    namespaces: {names: [%s]}
    authorization: {credentials_file: %q}
    tls_config: {ca_file: %q}
  relabel_configs:
  - {source_labels: [__meta_kubernetes_service_name], regex: wsl-gpu-hook-metrics, action: keep}
  - {source_labels: [__meta_kubernetes_endpointslice_port_name], regex: metrics, action: keep}
  # As the chart's ServiceMonitor does.
  - {source_labels: [__meta_kubernetes_pod_node_name], target_label: node}
  # Only the laptop's pods are reachable from its network here.
  - {source_labels: [node], regex: laptop, action: keep}
`, rules, c.Server, ns, filepath.Join(dir, "token"), filepath.Join(c.Dir, "pki", "ca.crt"))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := laptop.IP + ":9090"
	p, err := laptop.StartInNet("prometheus", filepath.Join(c.Bins.Prometheus, "prometheus"),
		"--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(10 * time.Second) })
	pr := &prometheus{url: "http://" + addr, p: p}
	c.Wait(t, time.Minute, "Prometheus ready", func() bool {
		resp, err := http.Get(pr.url + "/-/ready")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})
	return pr
}

// series is one result of an instant query.
type series struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

func (s series) value() float64 {
	v, _ := strconv.ParseFloat(fmt.Sprint(s.Value[1]), 64)
	return v
}

// query runs an instant PromQL query; a query Prometheus refuses is an
// error, with its reason.
func (p *prometheus) query(q string) ([]series, error) {
	resp, err := http.Get(p.url + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Status, Error string
		Data          struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, err
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%s: %s", q, r.Error)
	}
	if r.Data.ResultType == "scalar" {
		var v [2]any
		json.Unmarshal(r.Data.Result, &v)
		return []series{{Value: v}}, nil
	}
	var out []series
	err = json.Unmarshal(r.Data.Result, &out)
	return out, err
}

// waitSeries waits until q returns series that ok accepts.
func (p *prometheus) waitSeries(x tc, d time.Duration, q string, ok func([]series) bool) []series {
	x.Helper()
	var got []series
	var err error
	x.wait(d, "PromQL "+q, func() bool {
		got, err = p.query(q)
		return err == nil && len(got) > 0 && (ok == nil || ok(got))
	})
	return got
}

// labelSets renders a result's label sets, sorted, for comparison.
func labelSets(ss []series) []string {
	var out []string
	for _, s := range ss {
		keys := make([]string, 0, len(s.Metric))
		for k := range s.Metric {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var b strings.Builder
		for _, k := range keys {
			fmt.Fprintf(&b, "%s=%q ", k, s.Metric[k])
		}
		out = append(out, b.String())
	}
	sort.Strings(out)
	return out
}

// panelQueries are the dashboard's queries with its variables set to
// everything.
func panelQueries(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range d.Panels {
		for i, tg := range p.Targets {
			out[fmt.Sprintf("%s #%d", p.Title, i)] = strings.ReplaceAll(tg.Expr, "$node", ".*")
		}
	}
	if len(out) == 0 {
		t.Fatal("the dashboard has no queries")
	}
	return out
}

// rule is one loaded rule as Prometheus reports it.
type rule struct {
	Name, Query, Type, Health, LastError string
}

// rules are the rules Prometheus loaded from the chart's rule file.
func (p *prometheus) rules() ([]rule, error) {
	resp, err := http.Get(p.url + "/api/v1/rules")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Data struct{ Groups []struct{ Rules []rule } }
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, err
	}
	var out []rule
	for _, g := range r.Data.Groups {
		out = append(out, g.Rules...)
	}
	return out, nil
}

// testMetrics runs a real Prometheus (3.16) against the chart's
// metrics, as people read them: a GPU pod's memory by its pod, namespace
// and container names; engine busy over a window; which pod holds the
// adapter; every series kept across a WSL reboot (new LUIDs, the same
// adapters); and every dashboard panel's and every rule's query answering
// with series while a GPU pod runs.
func testMetrics(t *testing.T, e env) {
	c := e.c.For(t)
	x := tc{t, c}
	if out, err := c.Helm("install", "wsl-gpu-hook", chart, "-n", ns, "--create-namespace", "--set", "image.tag=e2e",
		"--set", "interval=2s", "--set", "metrics.sampleInterval=2s", "--set", "metrics.perProcess=true",
		"--wait", "--timeout", "5m"); err != nil {
		t.Fatalf("helm install: %v\n%s\n%s", err, out, c.Diagnose())
	}
	x.waitAllocatable("laptop", "nvidia.com/gpu", "1")
	// gpu-worker is the process the simulated host gives 2 GiB of the
	// RTX's memory; it is not the container's pid 1 (every container's
	// pid 1 is ambiguous to the host).
	c.Apply(`apiVersion: v1
kind: Pod
metadata: {name: worker}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: ` + cluster.TestImage + `
    imagePullPolicy: Never
    command: ["sh", "-c", "sleep 3600 | gpu-worker /dev/dxg"]
    resources: {limits: {nvidia.com/gpu: 1}}
`)
	t.Cleanup(func() { x.deletePods("worker") })
	p := startPrometheus(t, c)

	t.Run("a pod's GPU memory under its pod, namespace and container", func(t *testing.T) {
		x := tc{t, c}
		got := p.waitSeries(x, 2*time.Minute, `wsl_gpu_container_memory_bytes{gpu="`+rtx+`",group="local",namespace="default",pod="worker",container="main"}`,
			func(s []series) bool { return s[0].value() == 2<<30 })
		if got[0].Metric["node"] != "laptop" {
			t.Errorf("series %v lacks node=laptop", got[0].Metric)
		}
		p.waitSeries(x, time.Minute, `wsl_gpu_allocation_info{gpu="`+rtx+`",namespace="default",pod="worker",container="main",source="nvidia.com/gpu"}`, nil)
	})

	t.Run("engine busy over a window", func(t *testing.T) {
		x := tc{t, c}
		// The model keeps the RTX's compute engine 75% busy.
		near := func(s []series) bool { v := s[0].value(); return v > 0.7 && v < 0.8 }
		p.waitSeries(x, 2*time.Minute, `avg_over_time(wsl_gpu_engine_busy_ratio{gpu="`+rtx+`",kind="compute"}[20s])`, near)
		p.waitSeries(x, 2*time.Minute, `sum(rate(wsl_gpu_engine_running_seconds_total{gpu="`+rtx+`",kind="compute"}[20s]))`, near)
	})

	t.Run("every dashboard panel and rule answers with series", func(t *testing.T) {
		x := tc{t, c}
		for title, q := range panelQueries(t) {
			if got, err := p.query(q); err != nil || len(got) == 0 {
				t.Errorf("panel %s: %q: %d series, %v", title, q, len(got), err)
			}
		}
		// The rules are the chart's file, as Prometheus loaded it (it
		// refuses to start on a file it cannot parse).
		var rules []rule
		x.wait(time.Minute, "Prometheus's rules evaluated", func() bool {
			var err error
			rules, err = p.rules()
			if err != nil || len(rules) == 0 {
				return false
			}
			for _, r := range rules {
				if r.Health == "unknown" {
					return false
				}
			}
			return true
		})
		records := map[string]bool{}
		for _, r := range rules {
			if r.Type == "recording" {
				records[r.Name] = true
			}
		}
		signal := regexp.MustCompile(`^([a-z_:]+) [<>=!]+ [0-9.]+$`)
		for _, r := range rules {
			if r.Health != "ok" {
				t.Errorf("rule %s: health %s: %s", r.Name, r.Health, r.LastError)
			}
			q := r.Query
			if r.Type == "alerting" {
				// Each alert compares a recording rule with a threshold:
				// the signal answers while nothing is wrong.
				m := signal.FindStringSubmatch(r.Query)
				if m == nil || !records[m[1]] {
					t.Errorf("alert %s: %q does not compare a recording rule with a threshold", r.Name, r.Query)
					continue
				}
				q = m[1]
			}
			if got, err := p.query(q); err != nil || len(got) == 0 {
				t.Errorf("rule %s: %q: %d series, %v", r.Name, q, len(got), err)
			}
		}
		if len(records) == 0 || len(rules) == len(records) {
			t.Errorf("loaded %d rules, %d recording: want recording rules and alerts", len(rules), len(records))
		}
	})

	t.Run("a WSL reboot keeps every series", func(t *testing.T) {
		x := tc{t, c}
		q := `{__name__=~"wsl_gpu_(up|memory_.*|engine_.*|container_memory_bytes)", node="laptop"}`
		before := labelSets(p.waitSeries(x, time.Minute, q, nil))
		// Every adapter gets a new LUID; the hardware stays.
		if err := os.WriteFile(e.luids, []byte("0=0x7000001\n1=0x7000002\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		p.waitSeries(x, 2*time.Minute, `wsl_gpu_adapter_info{gpu="`+rtx+`",luid="0x7000002"}`, nil)
		// Once the new LUIDs show, the series Prometheus has now are the
		// ones it had: a series is new only if a label changed.
		time.Sleep(5 * time.Second) // a sample or two after the reboot
		after := labelSets(p.waitSeries(x, time.Minute, q, nil))
		if strings.Join(after, "\n") != strings.Join(before, "\n") {
			t.Errorf("series after a reboot:\n%s\nbefore:\n%s", strings.Join(after, "\n"), strings.Join(before, "\n"))
		}
		// And the RTX's memory is one series across the reboot.
		if got, err := p.query(`count_over_time(wsl_gpu_memory_used_bytes{gpu="` + rtx + `",group="local"}[1m])`); err != nil || len(got) != 1 {
			t.Errorf("the RTX's memory over the reboot: %d series, %v", len(got), err)
		}
		os.Remove(e.luids)
	})

	if out, err := c.Helm("uninstall", "wsl-gpu-hook", "-n", ns, "--wait", "--timeout", "3m"); err != nil {
		t.Errorf("helm uninstall: %v\n%s", err, out)
	}
}
