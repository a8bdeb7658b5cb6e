package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/kube/kubeapi"
)

// Verdict is what a node pod's stop means.
type Verdict struct {
	// Uninstall says to remove what the pod put on its node.
	Uninstall bool
	// Reason says why, for the pod's log.
	Reason string
}

// daemonSet is the part of a DaemonSet this package reads.
type daemonSet struct {
	Metadata struct {
		UID               string `json:"uid"`
		DeletionTimestamp string `json:"deletionTimestamp"`
	} `json:"metadata"`
	Spec struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
	} `json:"spec"`
}

func dsPath(namespace, name string) string {
	return kubeapi.Path("apis", "apps", "v1", "namespaces", namespace, "daemonsets", name)
}

// Decide asks the API server whether the DaemonSet namespace/name, the
// stopping pod's own, is gone or being deleted.
func Decide(ctx context.Context, c *kubeapi.Client, namespace, name string) Verdict {
	what := "DaemonSet " + namespace + "/" + name
	body, err := c.Do(ctx, "get "+what, http.MethodGet, dsPath(namespace, name), nil, "")
	switch {
	case kubeapi.IsNotFound(err):
		return Verdict{Uninstall: true, Reason: what + " is gone: the chart is uninstalled"}
	case err != nil:
		return Verdict{Reason: fmt.Sprintf("cannot tell whether the chart is uninstalled (%v): keeping what is on the node, as for a restart", err)}
	}
	var ds daemonSet
	if err := json.Unmarshal(body, &ds); err != nil {
		return Verdict{Reason: fmt.Sprintf("cannot tell whether the chart is uninstalled (get %s: %v): keeping what is on the node, as for a restart", what, err)}
	}
	if ds.Metadata.DeletionTimestamp != "" {
		return Verdict{Uninstall: true, Reason: what + " is being deleted: the chart is uninstalled"}
	}
	return Verdict{Reason: what + " is still there (an upgrade, a restart, a drain or an eviction): keeping what is on the node for the pods that use it"}
}

// Uninstall deletes the DaemonSet namespace/name and waits, polling every
// poll, until none of its pods is left or ctx ends, printing to out what
// it did and, every so often, the pods still stopping. Its pods then see
// the DaemonSet gone when they stop, and clean their nodes.
func Uninstall(ctx context.Context, c *kubeapi.Client, namespace, name string, poll time.Duration, out io.Writer) error {
	what := "DaemonSet " + namespace + "/" + name
	body, err := c.Do(ctx, "get "+what, http.MethodGet, dsPath(namespace, name), nil, "")
	if kubeapi.IsNotFound(err) {
		fmt.Fprintf(out, "%s is already gone: nothing to wait for\n", what)
		return nil
	}
	if err != nil {
		return err
	}
	var ds daemonSet
	if err := json.Unmarshal(body, &ds); err != nil {
		return fmt.Errorf("get %s: %w", what, err)
	}
	if len(ds.Spec.Selector.MatchLabels) == 0 {
		return fmt.Errorf("%s selects its pods by no labels: delete it by hand", what)
	}
	// Background: the DaemonSet goes at once and the garbage collector
	// deletes its pods, which find it gone when they stop. The UID
	// precondition deletes the object read above, not a newer one.
	opts := map[string]any{"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background",
		"preconditions": map[string]string{"uid": ds.Metadata.UID}}
	if _, err := c.Do(ctx, "delete "+what, http.MethodDelete, dsPath(namespace, name), opts, ""); err != nil && !kubeapi.IsNotFound(err) {
		return err
	}
	fmt.Fprintf(out, "deleted %s; waiting for its pods to clean their nodes\n", what)
	selector := selectorString(ds.Spec.Selector.MatchLabels)
	list := kubeapi.Path("api", "v1", "namespaces", namespace, "pods") + "?labelSelector=" + url.QueryEscape(selector)
	var left []string
	for {
		body, err := c.Do(ctx, "list pods "+selector, http.MethodGet, list, nil, "")
		if err == nil {
			now, perr := podsLeft(body)
			if perr != nil {
				return fmt.Errorf("list pods %s: %w", selector, perr)
			}
			if len(now) == 0 {
				fmt.Fprintf(out, "every pod of %s is gone\n", what)
				return nil
			}
			if !slices.Equal(now, left) {
				fmt.Fprintf(out, "still stopping: %s\n", strings.Join(now, " "))
			}
			left = now
		}
		select {
		case <-ctx.Done():
			if left == nil {
				return fmt.Errorf("wait for the pods of %s: %w", what, err)
			}
			return &PodsLeftError{DaemonSet: what, Pods: left}
		case <-time.After(poll):
		}
	}
}

// PodsLeftError says which pods of the DaemonSet had not stopped when
// Uninstall's time was up (a node that is down cannot stop its pod). Their
// nodes keep what the pods put there: a caller may go on with the
// uninstall.
type PodsLeftError struct {
	DaemonSet string
	// Pods are name@node.
	Pods []string
}

func (e *PodsLeftError) Error() string {
	return fmt.Sprintf("pods of %s still stopping: %s: their nodes keep the hook copy and the CDI specs", e.DaemonSet, strings.Join(e.Pods, " "))
}

// selectorString renders matchLabels as a label selector, keys sorted.
func selectorString(m map[string]string) string {
	parts := make([]string, 0, len(m))
	for k, v := range m {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// podsLeft lists a pod list's pods as name@node.
func podsLeft(body []byte) ([]string, error) {
	var list struct {
		Items []struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec struct {
				NodeName string `json:"nodeName"`
			} `json:"spec"`
		} `json:"items"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(list.Items))
	for _, p := range list.Items {
		out = append(out, p.Metadata.Name+"@"+p.Spec.NodeName)
	}
	return out, nil
}

// DecideInCluster is Decide for the stopping pod itself: its service
// account, its namespace, and daemonSet, its DaemonSet's name ("" when the
// pod was started without one: keep everything). It waits at most 5 s.
func DecideInCluster(daemonSet string) Verdict {
	if daemonSet == "" {
		return Verdict{Reason: "no DaemonSet named (--daemonset): keeping what is on the node"}
	}
	api, err := kubeapi.InCluster(kubeapi.ServiceAccountDir)
	if err == nil {
		var ns string
		if ns, err = kubeapi.Namespace(kubeapi.ServiceAccountDir); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return Decide(ctx, api, ns, daemonSet)
		}
	}
	return Verdict{Reason: fmt.Sprintf("cannot tell whether the chart is uninstalled (%v): keeping what is on the node, as for a restart", err)}
}
