package kubeapi

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
	"net/url"
	"os"
	"strings"
	"time"
)

// ServiceAccountDir is where the kubelet mounts a pod's service account.
const ServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// maxBody bounds what a reply may hold: a node or pod list of a large
// cluster is a few megabytes.
const maxBody = 64 << 20

// Client sends requests to one API server.
type Client struct {
	// Server is the API server's URL.
	Server string
	// TokenFile holds the bearer token, re-read before every request;
	// Token is used when TokenFile is "".
	TokenFile, Token string
	// HTTP trusts the API server's CA and bounds each request.
	HTTP *http.Client
}

// InCluster is the Client of a pod: the kubernetes Service from the
// environment, the service account's token and CA under dir
// (ServiceAccountDir in a pod).
func InCluster(dir string) (*Client, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, errors.New("not in a pod (no KUBERNETES_SERVICE_HOST): run it from the chart")
	}
	tokenFile := dir + "/token"
	if _, err := os.Stat(tokenFile); err != nil {
		return nil, fmt.Errorf("no service account token (automountServiceAccountToken off?): %w", err)
	}
	ca, err := os.ReadFile(dir + "/ca.crt")
	if err != nil {
		return nil, fmt.Errorf("read the API server's CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("%s/ca.crt holds no certificate", dir)
	}
	return &Client{Server: "https://" + net.JoinHostPort(host, port), TokenFile: tokenFile,
		HTTP: &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}}, nil
}

// Namespace is the pod's namespace as its service account mount names it.
func Namespace(dir string) (string, error) {
	b, err := os.ReadFile(dir + "/namespace")
	if err != nil {
		return "", fmt.Errorf("read the pod's namespace: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// StatusError is an answer other than 2xx.
type StatusError struct {
	// Op says what was asked, e.g. "patch node laptop".
	Op   string
	Code int
	// Message is the API server's Status message, or the start of the body.
	Message string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s: %d %s: %s", e.Op, e.Code, http.StatusText(e.Code), e.Message)
}

// IsNotFound reports whether err is a 404 answer.
func IsNotFound(err error) bool {
	var s *StatusError
	return errors.As(err, &s) && s.Code == http.StatusNotFound
}

// Do sends method to path (with query, e.g. "/api/v1/nodes?limit=1") and
// returns the body of a 2xx answer. body, when not nil, is sent as JSON
// with contentType (application/json when "").
func (c *Client) Do(ctx context.Context, op, method, path string, body any, contentType string) ([]byte, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Server+path, r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if body != nil {
		if contentType == "" {
			contentType = "application/json"
		}
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	token := c.Token
	if c.TokenFile != "" {
		b, err := os.ReadFile(c.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("%s: read the service account token: %w", op, err)
		}
		token = strings.TrimSpace(string(b))
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if resp.StatusCode/100 != 2 {
		msg := string(data[:min(len(data), 4096)])
		var status struct{ Message string }
		if json.Unmarshal(data, &status) == nil && status.Message != "" {
			msg = status.Message
		}
		return nil, &StatusError{Op: op, Code: resp.StatusCode, Message: msg}
	}
	return data, nil
}

// Path joins escaped segments into an API path: Path("api", "v1",
// "nodes", name) is /api/v1/nodes/<name escaped>.
func Path(segments ...string) string {
	var b strings.Builder
	for _, s := range segments {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}
