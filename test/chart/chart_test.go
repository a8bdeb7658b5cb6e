// Package chart renders deploy/helm/wsl-gpu-hook with helm itself (built
// alone from hack/kube's module into the e2e cache: hack/kube/build.sh
// helm) and checks what a cluster would be given: which accounts may patch
// nodes, and which admission policies narrow them.
package chart

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/vendors"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// object is one rendered manifest, with what these tests read of it.
type object struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Rules []rbacv1.PolicyRule `json:"rules"`
	// A ConfigMap's.
	Data map[string]string `json:"data"`
	// A ValidatingAdmissionPolicy's or a binding's.
	Spec struct {
		PolicyName        string                         `json:"policyName"`
		MatchConstraints  *admissionv1.MatchResources    `json:"matchConstraints"`
		ValidationActions []admissionv1.ValidationAction `json:"validationActions"`
	} `json:"spec"`
}

// rendered is a chart's manifests.
type rendered []object

func parse(t *testing.T, out string) rendered {
	t.Helper()
	var objs rendered
	d := yaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	for {
		var o object
		err := d.Decode(&o)
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("the rendered chart does not parse: %v\n%s", err, out)
		}
		if o.Kind != "" {
			objs = append(objs, o)
		}
	}
}

// grants names the cluster roles that may write resource (patch, update,
// create, delete or *), in any API group: RBAC cannot narrow such a grant
// to one node.
func (r rendered) grants(resource string) []string {
	var out []string
	for _, o := range r {
		if o.Kind != "ClusterRole" {
			continue
		}
		for _, rule := range o.Rules {
			if !slices.Contains(rule.Resources, resource) && !slices.Contains(rule.Resources, "*") {
				continue
			}
			if slices.ContainsFunc(rule.Verbs, func(v string) bool {
				return v == "patch" || v == "update" || v == "create" || v == "delete" || v == "*"
			}) {
				out = append(out, o.Metadata.Name)
				break
			}
		}
	}
	return out
}

// policed names the resources a ValidatingAdmissionPolicy that a binding
// enforces (Deny) matches.
func (r rendered) policed() []string {
	bound := map[string]bool{}
	for _, o := range r {
		if o.Kind == "ValidatingAdmissionPolicyBinding" && slices.Contains(o.Spec.ValidationActions, admissionv1.Deny) {
			bound[o.Spec.PolicyName] = true
		}
	}
	var out []string
	for _, o := range r {
		if o.Kind != "ValidatingAdmissionPolicy" || !bound[o.Metadata.Name] || o.Spec.MatchConstraints == nil {
			continue
		}
		for _, rule := range o.Spec.MatchConstraints.ResourceRules {
			out = append(out, rule.Resources...)
		}
	}
	return out
}

// helm is helm v4, built alone (not Kubernetes) into the e2e cache.
func helm(t *testing.T) func(args ...string) (string, error) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds helm (hack/kube/build.sh helm, about 3 minutes cold): skipped under -short")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(root, "hack/kube/build.sh"), "helm")
	cmd.Stderr = os.Stderr
	bin, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/kube/build.sh helm: %v", err)
	}
	h := filepath.Join(strings.TrimSpace(string(bin)), "helm")
	home := t.TempDir()
	return func(args ...string) (string, error) {
		cmd := exec.Command(h, args...)
		cmd.Dir = root
		// No cluster: helm renders as `helm template` does anywhere.
		cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home+"/cache", "HELM_CONFIG_HOME="+home+"/config",
			"HELM_DATA_HOME="+home+"/data", "KUBECONFIG="+home+"/no-kubeconfig")
		out, err := cmd.Output()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), errors.New(strings.TrimSpace(string(ee.Stderr)))
		}
		return string(out), err
	}
}

const chart = "deploy/helm/wsl-gpu-hook"

// TestNodePatchIsNeverUnpoliced renders the chart as `helm template` and
// a cluster's install would, on Kubernetes versions and API sets that
// have ValidatingAdmissionPolicy and that do not: the chart either
// refuses with one line that says what to do, or every ClusterRole that
// may write nodes or ResourceSlices comes with the policies that keep each
// node's token to its own node. Before issue 46 a 1.29 cluster, or helm
// template without --api-versions, got the node patch and no policy.
func TestNodePatchIsNeverUnpoliced(t *testing.T) {
	helm := helm(t)
	// A cluster's discovery lists kinds (apps/v1/DaemonSet among them);
	// helm template alone lists only group versions.
	const vap, cluster = "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy", "apps/v1/DaemonSet"
	tests := []struct {
		name string
		args []string
		// refused: the error's one line holds this; else what is granted
		// and policed.
		refused        string
		grants, policy []string // ClusterRoles writing nodes; resources policed
		slices         []string // ClusterRoles writing resourceslices
	}{
		{name: "Kubernetes 1.29, helm template without --api-versions", args: []string{"--kube-version", "1.29.0"},
			refused: "chart requires kubeVersion: >=1.30.0-0 which is incompatible with Kubernetes v1.29.0"},
		{name: "Kubernetes 1.29 whose API server lists the policy kind", args: []string{"--kube-version", "1.29.0", "--api-versions", vap + "," + cluster},
			refused: "chart requires kubeVersion: >=1.30.0-0 which is incompatible with Kubernetes v1.29.0"},
		{name: "Kubernetes 1.37 with the API", args: []string{"--kube-version", "1.37.0", "--api-versions", vap + "," + cluster},
			grants: []string{"x-wsl-gpu-hook-node-labels", "x-wsl-gpu-hook-uninstall"}, policy: []string{"nodes"}},
		{name: "Kubernetes 1.37, helm template without --api-versions", args: []string{"--kube-version", "1.37.0"},
			grants: []string{"x-wsl-gpu-hook-node-labels", "x-wsl-gpu-hook-uninstall"}, policy: []string{"nodes"}},
		{name: "Kubernetes 1.37 with DRA", args: []string{"--kube-version", "1.37.0", "--api-versions", vap + "," + cluster, "--set", "dra.enabled=true"},
			grants: []string{"x-wsl-gpu-hook-node-labels", "x-wsl-gpu-hook-uninstall"}, policy: []string{"nodes", "resourceslices"},
			slices: []string{"x-wsl-gpu-hook-dra"}},
		{name: "Kubernetes 1.37 whose API server lacks the policy kind", args: []string{"--kube-version", "1.37.0", "--api-versions", cluster},
			refused: "admissionPolicy: this cluster serves no admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy (Kubernetes 1.30+), which keeps each node's token to its own node: enable that API, or set nodeLabels.enabled=false and dra.enabled=false (no node or ResourceSlice write is granted), or admissionPolicy.enabled=false to grant every node's token a patch on every node"},
		{name: "that cluster, without node labels", args: []string{"--kube-version", "1.37.0", "--api-versions", cluster, "--set", "nodeLabels.enabled=false"}},
		// Turning the policies off is the one explicit way to the grant
		// without them (NOTES.txt warns: TestNotesWarn).
		{name: "admissionPolicy.enabled=false", args: []string{"--kube-version", "1.37.0", "--set", "admissionPolicy.enabled=false"},
			grants: []string{"x-wsl-gpu-hook-node-labels", "x-wsl-gpu-hook-uninstall"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := helm(append([]string{"template", "x", chart}, tt.args...)...)
			if tt.refused != "" {
				if err == nil {
					r := parse(t, out)
					t.Fatalf("rendered, want it refused with %q: ClusterRoles writing nodes %q, policies on %q", tt.refused, r.grants("nodes"), r.policed())
				}
				first, _, _ := strings.Cut(err.Error(), "\n")
				if !strings.Contains(first, tt.refused) {
					t.Errorf("refused with\n%s\nwant one line holding\n%s", err, tt.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			r := parse(t, out)
			if got := r.grants("nodes"); !slices.Equal(got, tt.grants) {
				t.Errorf("ClusterRoles that may write nodes: %q, want %q", got, tt.grants)
			}
			if got := r.grants("resourceslices"); !slices.Equal(got, tt.slices) {
				t.Errorf("ClusterRoles that may write ResourceSlices: %q, want %q", got, tt.slices)
			}
			if got := r.policed(); !slices.Equal(got, tt.policy) {
				t.Errorf("enforced admission policies match %q, want %q", got, tt.policy)
			}
		})
	}
}

// TestNotesWarn: with the policies turned off and a write granted, what
// helm install prints says what the plugin's token may then do.
func TestNotesWarn(t *testing.T) {
	helm := helm(t)
	for _, tt := range []struct {
		set  []string
		want string
	}{
		{[]string{"admissionPolicy.enabled=false"}, "WARNING: admissionPolicy.enabled=false: no admission policy narrows the plugin's account."},
		{[]string{"admissionPolicy.enabled=false", "nodeLabels.enabled=false"}, ""},
		{nil, ""},
	} {
		args := []string{"install", "x", chart, "--dry-run=client"}
		for _, s := range tt.set {
			args = append(args, "--set", s)
		}
		out, err := helm(args...)
		if err != nil {
			t.Fatalf("%v: %v", tt.set, err)
		}
		_, notes, _ := strings.Cut(out, "\nNOTES:\n")
		if got := strings.Contains(notes, "WARNING"); got != (tt.want != "") || !strings.Contains(notes, tt.want) {
			t.Errorf("--set %v: NOTES\n%s\nwant a warning: %q", tt.set, notes, tt.want)
		}
	}
}

// TestValuesAddNoLines: a string value with a newline cannot add a key of
// its own to what the chart renders (a `hostNetwork: true` after a
// priorityClassName, a command after an image). Names are held to
// Kubernetes' name rules by values.schema.json, which names the key;
// free text is quoted.
func TestValuesAddNoLines(t *testing.T) {
	helm := helm(t)
	const inject = "x\n      hostNetwork: true\n      y: z"
	for _, tt := range []struct {
		key   string
		extra []string
	}{
		{key: "priorityClassName"},
		{key: "serviceAccount.name"},
		{key: "nameOverride"},
		{key: "image.repository"},
		{key: "runtimeClass.name", extra: []string{"runtimeClass.create=true"}},
		{key: "runtimeClass.handler", extra: []string{"runtimeClass.create=true"}},
		{key: "metrics.webConfigSecret"},
	} {
		t.Run(tt.key, func(t *testing.T) {
			args := []string{"template", "x", chart, "--set-string", tt.key + "=" + inject}
			for _, e := range tt.extra {
				args = append(args, "--set", e)
			}
			out, err := helm(args...)
			if err != nil {
				if at := "at '/" + strings.ReplaceAll(tt.key, ".", "/") + "'"; !strings.Contains(err.Error(), at) {
					t.Errorf("refused, but not naming the key (%s):\n%s", at, err)
				}
				return
			}
			if strings.Contains(out, "\n      hostNetwork: true") || strings.Contains(out, "\n      y: z") {
				t.Errorf("the value added lines to the rendered chart:\n%s", out)
			}
			parse(t, out)
		})
	}
}

// TestConfigMapSetsEveryVendor: the plugin's config.toml the chart writes
// loads as the plugin loads it (strictly), advertises each vendor of the
// vendor table under its resource by default, and none with dra.enabled,
// when the DRA driver advertises them: a vendor the chart writes no key
// for would keep its default there, and be advertised twice.
func TestConfigMapSetsEveryVendor(t *testing.T) {
	helm := helm(t)
	for _, tt := range []struct {
		name string
		args []string
		want func(vendors.Row) string
	}{
		{name: "defaults", want: func(r vendors.Row) string { return r.Resource }},
		{name: "dra.enabled", args: []string{"--set", "dra.enabled=true"}, want: func(vendors.Row) string { return "" }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := helm(append([]string{"template", "x", chart}, tt.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			var toml string
			for _, o := range parse(t, out) {
				if o.Kind == "ConfigMap" && o.Data["config.toml"] != "" {
					toml = o.Data["config.toml"]
				}
			}
			if toml == "" {
				t.Fatal("the chart writes no ConfigMap with a config.toml")
			}
			f := filepath.Join(t.TempDir(), "config.toml")
			if err := os.WriteFile(f, []byte(toml), 0o644); err != nil {
				t.Fatal(err)
			}
			c, err := config.Load(f, true)
			if err != nil {
				t.Fatalf("the plugin refuses the chart's config.toml: %v\n%s", err, toml)
			}
			for _, row := range vendors.Rows() {
				if got, ok := c.DevicePlugin.Of(row.Name); ok && got != tt.want(row) {
					t.Errorf("vendor %s is advertised under %q, want %q: values.yaml's resources lacks it?\n%s", row.Name, got, tt.want(row), toml)
				}
			}
		})
	}
}
