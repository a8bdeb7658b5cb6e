package containernames

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"
)

// Names are how people know one container.
type Names struct {
	// Namespace and Pod are Kubernetes'; "" for an engine's container.
	Namespace, Pod string
	// Container is the container's name.
	Container string
}

// Source lists the containers it knows, by full id.
type Source interface {
	Names(ctx context.Context) (map[string]Names, error)
}

// Lookup finds id (a full id or a prefix of at least 12 hex digits) in
// names.
func Lookup(names map[string]Names, id string) (Names, bool) {
	if len(id) < 12 {
		return Names{}, false
	}
	if n, ok := names[id]; ok {
		return n, true
	}
	for full, n := range names {
		if strings.HasPrefix(full, id) {
			return n, true
		}
	}
	return Names{}, false
}

// KubeletLogs is the kubelet's directory of container log links,
// /var/log/containers on a node.
type KubeletLogs struct{ Dir string }

// logLink is <pod>_<namespace>_<container>-<64 hex id>.log: pod and
// container names are DNS labels or subdomains (no '_'), so the
// underscores split it unambiguously.
var logLink = regexp.MustCompile(`^([a-z0-9][a-z0-9.-]*)_([a-z0-9][a-z0-9-]*)_([a-z0-9][a-z0-9-]*)-([0-9a-f]{64})\.log$`)

// Names reads the directory's link names; names not in the kubelet's
// layout are skipped.
func (k KubeletLogs) Names(context.Context) (map[string]Names, error) {
	ents, err := os.ReadDir(k.Dir)
	if err != nil {
		return nil, fmt.Errorf("read the kubelet's container log links: %w", err)
	}
	out := make(map[string]Names, len(ents))
	for _, e := range ents {
		if m := logLink.FindStringSubmatch(e.Name()); m != nil {
			out[m[4]] = Names{Pod: m[1], Namespace: m[2], Container: m[3]}
		}
	}
	return out, nil
}

// Engine is Docker's or podman's engine API on a unix socket.
type Engine struct {
	Socket string
	// Timeout bounds one listing; 0 means 2 s.
	Timeout time.Duration
}

// maxList bounds the engine's answer: a few thousand containers.
const maxList = 8 << 20

// Names lists the running containers. An engine's container that
// Kubernetes made (a kubelet on Docker through cri-dockerd) carries the
// pod's names in its labels.
func (e Engine) Names(ctx context.Context) (map[string]Names, error) {
	timeout := e.Timeout
	if timeout == 0 {
		timeout = 2 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// One connection per listing, closed with its answer: dockerd keeps
	// an idle API connection open for ever, so one left idle was an fd
	// in both processes at every scan (top scans every second). A
	// listing a second gains nothing from keeping it.
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", e.Socket)
		},
		DisableKeepAlives:      true,
		MaxResponseHeaderBytes: 64 << 10,
	}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://engine/containers/json", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("list containers at %s: %w", e.Socket, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("list containers at %s: %s", e.Socket, resp.Status)
	}
	var list []struct {
		ID     string            `json:"Id"`
		Names  []string          `json:"Names"`
		Labels map[string]string `json:"Labels"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxList)).Decode(&list); err != nil {
		return nil, fmt.Errorf("list containers at %s: %w", e.Socket, err)
	}
	out := make(map[string]Names, len(list))
	for _, c := range list {
		n := Names{Namespace: c.Labels["io.kubernetes.pod.namespace"], Pod: c.Labels["io.kubernetes.pod.name"], Container: c.Labels["io.kubernetes.container.name"]}
		if n.Container == "" && len(c.Names) > 0 {
			n.Container = strings.TrimPrefix(c.Names[0], "/")
		}
		out[c.ID] = n
	}
	return out, nil
}

// Sources reads every source and merges what they know; a source that
// is not there (no such socket or directory) is skipped, and the others'
// errors are joined.
func Sources(ctx context.Context, srcs ...Source) (map[string]Names, error) {
	out := map[string]Names{}
	var errs []error
	for _, s := range srcs {
		names, err := s.Names(ctx)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
			continue
		}
		for id, n := range names {
			out[id] = n
		}
	}
	return out, errors.Join(errs...)
}

// OnThisHost are the sources a command on a WSL distro or a node asks:
// the kubelet's log links, Docker's and rootful podman's sockets.
func OnThisHost() []Source {
	return []Source{
		KubeletLogs{Dir: "/var/log/containers"},
		Engine{Socket: "/var/run/docker.sock"},
		Engine{Socket: "/run/podman/podman.sock"},
	}
}
