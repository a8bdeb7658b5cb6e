package nodelabels

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/deviceplugin"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/driverstore"
)

// Prefix starts every label this package sets or removes.
const Prefix = "wsl-gpu-hook.dev/"

// Labels are the node's labels for inv (nil: the adapters cannot be
// listed, so only wsl and present=false): node-feature-discovery's
// features under Prefix, plus each vendor's driver store folder.
func Labels(inv *driverstore.Inventory) map[string]string {
	out := map[string]string{Prefix + "wsl": "true"}
	for _, l := range strings.Split(deviceplugin.Features(inv), "\n") {
		k, v, ok := strings.Cut(l, "=")
		if !ok || strings.HasPrefix(l, "#") {
			continue
		}
		out[Prefix+strings.TrimPrefix(k, deviceplugin.FeaturePrefix)] = v
	}
	if inv != nil {
		for _, a := range inv.Adapters {
			k := Prefix + string(a.Vendor) + ".driver"
			if _, ok := out[k]; !ok && a.Folder != "" && !a.Type.Software() && len(a.Folder) <= 63 {
				out[k] = a.Folder
			}
		}
	}
	return out
}

// Client patches one node's labels through the API server.
type Client struct {
	// Server is the API server's URL; Token a bearer token; HTTP the
	// client that trusts the API server's CA.
	Server, Token string
	HTTP          *http.Client
	Node          string
}

// InCluster is the Client of a pod: the kubernetes Service from the
// environment, the service account token and CA mounted in the pod. node
// is the node whose labels Patch changes; RemoveAll needs none.
func InCluster(node string) (*Client, error) {
	const sa = "/var/run/secrets/kubernetes.io/serviceaccount/"
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, fmt.Errorf("node labels: not in a pod (no KUBERNETES_SERVICE_HOST): run with the chart's labels.enabled")
	}
	token, err := os.ReadFile(sa + "token")
	if err != nil {
		return nil, fmt.Errorf("node labels: no service account token (automountServiceAccountToken off?): %w", err)
	}
	ca, err := os.ReadFile(sa + "ca.crt")
	if err != nil {
		return nil, fmt.Errorf("node labels: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("node labels: %sca.crt holds no certificate", sa)
	}
	return &Client{Server: "https://" + net.JoinHostPort(host, port), Token: strings.TrimSpace(string(token)), Node: node,
		HTTP: &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}}, nil
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
	body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPatch, c.Server+"/api/v1/nodes/"+c.Node, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/merge-patch+json")
	_, err = c.do(req, "patch node "+c.Node)
	return err
}

// do sends req with the token and returns the body of a 2xx answer; any
// other answer is an error with the API server's message.
func (c *Client) do(req *http.Request, what string) ([]byte, error) {
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("node labels: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("node labels: %s: %w", what, err)
	}
	if resp.StatusCode/100 != 2 {
		msg := body[:min(len(body), 4096)]
		var status struct{ Message string }
		if json.Unmarshal(body, &status) == nil && status.Message != "" {
			msg = []byte(status.Message)
		}
		return nil, fmt.Errorf("node labels: %s: %s: %s", what, resp.Status, msg)
	}
	return body, nil
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
// keys removed. It is what the chart's uninstall runs: the plugin pods,
// which remove their own node's labels when they stop, have lost their
// RBAC by then.
func (c *Client) RemoveAll(ctx context.Context) (map[string][]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Server+"/api/v1/nodes", nil)
	if err != nil {
		return nil, err
	}
	body, err := c.do(req, "list nodes")
	if err != nil {
		return nil, err
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
