package nodelabels

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/kube/deviceplugin"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/kube/kubeapi"
)

// Prefix starts every label this package sets or removes.
const Prefix = "wsl-gpu-hook.dev/"

// Labels are the node's labels for inv (nil: the adapters cannot be
// listed, so only wsl and present=false): the facts node-feature-discovery's
// feature file also carries (deviceplugin.Facts), under Prefix, plus each
// vendor's driver store folder.
func Labels(inv *driverstore.Inventory) map[string]string {
	f := deviceplugin.FactsOf(inv)
	out := map[string]string{Prefix + "wsl": "true"}
	for k, v := range f.Values() {
		out[Prefix+k] = v
	}
	for v, vf := range f.Vendors {
		if vf.Driver != "" && len(vf.Driver) <= 63 {
			out[Prefix+string(v)+".driver"] = vf.Driver
		}
	}
	return out
}

// Client patches one node's labels through the API server.
type Client struct {
	API *kubeapi.Client
	// Node is the node whose labels Patch changes; RemoveAll needs none.
	Node string
}

// InCluster is the Client of a pod, with its service account.
func InCluster(node string) (*Client, error) {
	api, err := kubeapi.InCluster(kubeapi.ServiceAccountDir)
	if err != nil {
		return nil, fmt.Errorf("node labels: %w", err)
	}
	return &Client{API: api, Node: node}, nil
}

// Patch sets want on the node and removes the labels in had (ours, set
// earlier) that want lacks, in one merge patch; nothing else on the node
// changes.
func (c *Client) Patch(ctx context.Context, want, had map[string]string) error {
	labels := map[string]any{}
	for k := range had {
		if _, ok := want[k]; !ok && strings.HasPrefix(k, Prefix) {
			labels[k] = nil
		}
	}
	for k, v := range want {
		labels[k] = v
	}
	body := map[string]any{"metadata": map[string]any{"labels": labels}}
	_, err := c.API.Do(ctx, "patch node "+c.Node, http.MethodPatch, kubeapi.Path("api", "v1", "nodes", c.Node), body, "application/merge-patch+json")
	if err != nil {
		return fmt.Errorf("node labels: %w", err)
	}
	return nil
}

// Ours reports whether key is one Labels can set: an uninstall removes
// these and no other label, whoever set it.
func Ours(key string) bool {
	name, ok := strings.CutPrefix(key, Prefix)
	if !ok {
		return false
	}
	switch name {
	case "wsl", "present", "adapters", "wddm", "compute-only", "vendors":
		return true
	}
	vendor, field, ok := strings.Cut(name, ".")
	if !ok || vendor == "" || strings.Trim(vendor, "abcdefghijklmnopqrstuvwxyz0123456789") != "" {
		return false
	}
	switch field {
	case "count", "wddm", "compute-only", "driver":
		return true
	}
	return false
}

// RemoveAll takes every label of ours (Ours) off every node, one merge
// patch per node that has any, and returns the nodes it changed with the
// keys removed. The chart's post-delete Job runs it for the nodes whose
// plugin pod did not take its own labels off at the uninstall (a pod that
// was not running, or could not reach the API server).
func (c *Client) RemoveAll(ctx context.Context) (map[string][]string, error) {
	body, err := c.API.Do(ctx, "list nodes", http.MethodGet, "/api/v1/nodes", nil, "")
	if err != nil {
		return nil, fmt.Errorf("node labels: %w", err)
	}
	var list struct {
		Items []struct {
			Metadata struct {
				Name   string            `json:"name"`
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("node labels: list nodes: %w", err)
	}
	removed := map[string][]string{}
	var errs []error
	for _, n := range list.Items {
		had := map[string]string{}
		for k, v := range n.Metadata.Labels {
			if Ours(k) {
				had[k] = v
			}
		}
		if len(had) == 0 {
			continue
		}
		node := *c
		node.Node = n.Metadata.Name
		if err := node.Remove(ctx, had); err != nil {
			errs = append(errs, err)
			continue
		}
		keys := make([]string, 0, len(had))
		for k := range had {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		removed[n.Metadata.Name] = keys
	}
	return removed, errors.Join(errs...)
}

// Remove takes every label in had off the node.
func (c *Client) Remove(ctx context.Context, had map[string]string) error {
	return c.Patch(ctx, map[string]string{}, had)
}

// Keys lists a label set's keys, sorted, for logs.
func Keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
