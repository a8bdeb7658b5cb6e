package metricsserver

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
)

func registry() *prometheus.Registry {
	r := prometheus.NewRegistry()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "wsl_gpu_test", Help: "A figure."})
	g.Set(1)
	r.MustRegister(g)
	return r
}

// start serves registry() on a free loopback port until the test ends.
func start(t *testing.T, l Limits) *Server {
	t.Helper()
	s, err := Listen(Options{Addr: "127.0.0.1:0", Limits: l, Log: slog.New(slog.DiscardHandler)}, registry())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return s
}

// self reads this process's resident memory (KiB) and open fds.
func self(t *testing.T) (rssKiB, fds int) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			rssKiB, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
		}
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return rssKiB, len(ents)
}

const request = "GET /metrics HTTP/1.1\r\nHost: metrics\r\n\r\n"

// clientsEnv makes the test binary the client side of
// TestIdleConnectionsAreBounded: it opens that many connections to the
// address, sends each one request, says how many connected, and holds
// them until its stdin closes. Its sockets are not the server's.
const clientsEnv = "WSL_GPU_TEST_METRICS_CLIENTS"

func TestMain(m *testing.M) {
	if v := os.Getenv(clientsEnv); v != "" {
		addr, n, _ := strings.Cut(v, ",")
		count, _ := strconv.Atoi(n)
		holdClients(addr, count)
		return
	}
	os.Exit(m.Run())
}

func holdClients(addr string, n int) {
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	next := make(chan int)
	for range 200 {
		wg.Go(func() {
			for range next {
				// A dial the server's full accept queue leaves unanswered
				// times out: the kernel drops its SYNs.
				c, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
				if err != nil {
					continue
				}
				_, _ = io.WriteString(c, request)
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	fmt.Printf("connected %d\n", len(conns))
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// TestIdleConnectionsAreBounded: 5000 keep-alive connections that each
// sent a request and then say nothing. The server used to accept and
// keep every one (a goroutine, buffers and an fd each, never closed:
// 57 MB and 5011 fds), and the chart's 128 MiB limit OOM-kills the pod,
// which also serves the kubelet. Now it holds at most MaxConns of them:
// each new one takes the place of an idle one.
func TestIdleConnectionsAreBounded(t *testing.T) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur < 6000 && lim.Max >= 6000 {
		lim.Cur = lim.Max
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
			t.Fatal(err)
		}
	}
	if lim.Cur < 6000 {
		t.Skipf("RLIMIT_NOFILE %d: 5000 connections need 6000", lim.Cur)
	}
	l := DefaultLimits()
	s := start(t, l)
	addr := s.Addr().String()
	if _, err := http.Get("http://" + addr + "/metrics"); err != nil {
		t.Fatal(err)
	}
	rss0, fds0 := self(t)

	c := exec.Command(os.Args[0], "-test.run=^$")
	c.Env = append(os.Environ(), clientsEnv+"="+addr+",5000")
	c.Stderr = os.Stderr
	stdin, err := c.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Wait()
	defer stdin.Close()

	var peakRSS, peakFDs atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			rss, fds := self(t)
			if int64(rss) > peakRSS.Load() {
				peakRSS.Store(int64(rss))
			}
			if int64(fds) > peakFDs.Load() {
				peakFDs.Store(int64(fds))
			}
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("clients: %v", err)
	}
	time.Sleep(time.Second) // the server's share of them is accepted by now
	close(stop)
	<-sampled
	growth, held := (peakRSS.Load()-int64(rss0))/1024, peakFDs.Load()-int64(fds0)
	t.Logf("clients: %s; server: %d MiB more resident (%d -> %d KiB), %d more fds (%d -> %d)",
		strings.TrimSpace(line), growth, rss0, peakRSS.Load(), held, fds0, peakFDs.Load())
	const maxGrowthMiB = 16
	if growth > maxGrowthMiB {
		t.Errorf("resident memory grew %d MiB, want at most %d", growth, maxGrowthMiB)
	}
	if max := int64(l.MaxConns) + 8; l.MaxConns == 0 || held > max {
		t.Errorf("the server held %d more fds, want at most MaxConns (%d) + 8", held, l.MaxConns)
	}
}

// TestIdleConnectionsAreClosed: a scraper's keep-alive connection is
// closed by the server after IdleTimeout; one that never sends a request
// after ReadHeaderTimeout.
func TestIdleConnectionsAreClosed(t *testing.T) {
	l := DefaultLimits()
	l.IdleTimeout, l.ReadHeaderTimeout = 300*time.Millisecond, 300*time.Millisecond
	s := start(t, l)
	for _, tt := range []struct {
		name string
		send string
	}{
		{"after a scrape", request},
		{"without a request", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", s.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			start := time.Now()
			if tt.send != "" {
				if _, err := io.WriteString(c, tt.send); err != nil {
					t.Fatal(err)
				}
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					t.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				start = time.Now()
			}
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			n, err := c.Read(make([]byte, 1))
			took := time.Since(start)
			if n != 0 || err != io.EOF {
				t.Fatalf("read after idling: %d, %v; want the server to close", n, err)
			}
			if took < 250*time.Millisecond || took > 2*time.Second {
				t.Errorf("closed after %v, want about 300ms", took)
			}
		})
	}
}

// TestWebConfigFile: --web-config-file takes the exporters' web
// configuration; basic auth is enforced, TLS is served, and a file that
// does not load stops the start with the file's name.
func TestWebConfigFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cert, key := selfSigned(t)
	write("cert.pem", cert)
	write("key.pem", key)
	// bcrypt (cost 4) of "scrape-secret".
	const users = "basic_auth_users:\n  prometheus: $2a$04$CDaXPjS.H9jyzfgarD1U5.7MMpkoN2KzKp8mRUG6lGNxbFkKvgPSC\n"
	tests := []struct {
		name, config string
		scheme       string
		user, pass   string
		wantStatus   int
		wantErr      string
	}{
		{name: "no file: plain HTTP", scheme: "http", wantStatus: 200},
		{name: "basic auth, right password", config: users, scheme: "http", user: "prometheus", pass: "scrape-secret", wantStatus: 200},
		{name: "basic auth, no password", config: users, scheme: "http", wantStatus: 401},
		{name: "basic auth, wrong password", config: users, scheme: "http", user: "prometheus", pass: "guess", wantStatus: 401},
		{name: "TLS", config: "tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n", scheme: "https", wantStatus: 200},
		{name: "unknown key", config: "tls_server_confg: {}\n", wantErr: "field tls_server_confg not found"},
		{name: "missing certificate", config: "tls_server_config:\n  cert_file: none.pem\n  key_file: key.pem\n", wantErr: "none.pem"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := ""
			if tt.config != "" {
				path = write(fmt.Sprintf("web%d.yml", i), tt.config)
			}
			s, err := Listen(Options{Addr: "127.0.0.1:0", WebConfigFile: path, Limits: DefaultLimits(), Log: slog.New(slog.DiscardHandler)}, registry())
			if tt.wantErr != "" {
				if !errors.Is(err, ErrWebConfig) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Listen = %v, want ErrWebConfig naming %s and %q", err, path, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- s.Serve(ctx) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("serve: %v", err)
				}
			}()
			req, _ := http.NewRequest("GET", tt.scheme+"://"+s.Addr().String()+"/metrics", nil)
			if tt.user != "" {
				req.SetBasicAuth(tt.user, tt.pass)
			}
			client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.wantStatus, body)
			}
			if tt.wantStatus == 200 && !strings.Contains(string(body), "wsl_gpu_test 1") {
				t.Errorf("body: %s", body)
			}
		})
	}
}

// selfSigned makes a certificate and key for 127.0.0.1, PEM-encoded.
func selfSigned(t *testing.T) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "metrics"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}))
}

// TestStartStop: Start serves in the background; once stop returns the
// address no longer answers, so a daemon that stops its metrics frees
// the port for its successor.
func TestStartStop(t *testing.T) {
	s, err := Listen(Options{Addr: "127.0.0.1:0", Limits: DefaultLimits()}, registry())
	if err != nil {
		t.Fatal(err)
	}
	stop := s.Start(context.Background())
	url := "http://" + s.Addr().String() + "/metrics"
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape while started: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape while started: %s", resp.Status)
	}
	stop()
	if c, err := net.DialTimeout("tcp", s.Addr().String(), time.Second); err == nil {
		c.Close()
		t.Fatal("the address still answers after stop")
	}
}

// flood keeps n silent connections to addr from 127.0.0.1 open until the
// test ends, dialing again whenever the server closes one: the attack
// that kept Prometheus out, 32 silent connections held ReadHeaderTimeout
// each and renewed. It returns once the first n are connected.
func flood(t *testing.T, addr string, n int) {
	t.Helper()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() { close(stop); wg.Wait() })
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, Timeout: time.Second}
	var up sync.WaitGroup
	up.Add(n)
	for range n {
		wg.Go(func() {
			first := true
			for {
				c, err := d.Dial("tcp", addr)
				if first {
					up.Done()
					first = false
				}
				if err == nil {
					go func() { <-stop; c.Close() }()
					_, _ = c.Read(make([]byte, 1)) // until the server closes it
					c.Close()
				}
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
				}
			}
		})
	}
	up.Wait()
}

// TestSilentFloodDoesNotKeepScrapersOut: silent connections, as many as
// the server holds and more, renewed whenever one is closed. The server
// stopped accepting at MaxConns, so a scrape waited in the accept queue
// behind the flood for ReadHeaderTimeout after ReadHeaderTimeout (and
// with TLS and basic auth configured all the same). Now a connection
// that has sent no request gives its place to a new one, the flood's
// source first: scrapes succeed at once, over plain HTTP and TLS.
func TestSilentFloodDoesNotKeepScrapersOut(t *testing.T) {
	dir := t.TempDir()
	cert, key := selfSigned(t)
	for name, body := range map[string]string{"cert.pem": cert, "key.pem": key,
		"web.yml": "tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		name, config, scheme string
	}{
		{"plain HTTP", "", "http"},
		{"TLS", filepath.Join(dir, "web.yml"), "https"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := DefaultLimits()
			s, err := Listen(Options{Addr: "127.0.0.1:0", WebConfigFile: tt.config, Limits: l, Log: slog.New(slog.DiscardHandler)}, registry())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(s.Start(context.Background()))
			addr := s.Addr().String()
			flood(t, addr, 2*l.MaxConns)
			// The scraper, from another address, as Prometheus is.
			client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
				DialContext:     (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext,
				TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true}}
			for i := range 5 {
				start := time.Now()
				resp, err := client.Get(tt.scheme + "://" + addr + "/metrics")
				if err != nil {
					t.Fatalf("scrape %d under the flood: %v", i, err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "wsl_gpu_test 1") {
					t.Fatalf("scrape %d under the flood: %s: %s", i, resp.Status, body)
				}
				if took := time.Since(start); took > time.Second {
					t.Errorf("scrape %d under the flood took %v", i, took)
				}
			}
		})
	}
}

// TestSilentConnectionsFromTheScrapersAddress: the flood and the
// scraper share an address (a NAT, a node's pods): the oldest silent
// connection goes first, so a scraper that sends its request at once is
// still answered.
func TestSilentConnectionsFromTheScrapersAddress(t *testing.T) {
	l := DefaultLimits()
	s := start(t, l)
	addr := s.Addr().String()
	var silent []net.Conn
	defer func() {
		for _, c := range silent {
			c.Close()
		}
	}()
	for range 4 * l.MaxConns {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		silent = append(silent, c)
	}
	client := &http.Client{Timeout: 2 * time.Second}
	start := time.Now()
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape behind %d silent connections: %v", len(silent), err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s", resp.Status)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("scrape behind %d silent connections took %v", len(silent), took)
	}
}

// twins is a collector whose series repeat: what a label value cut alike
// made, or any other series that does not gather.
type twins struct{ d *prometheus.Desc }

func (c twins) Describe(ch chan<- *prometheus.Desc) { ch <- c.d }
func (c twins) Collect(ch chan<- prometheus.Metric) {
	for range 2 {
		ch <- prometheus.MustNewConstMetric(c.d, prometheus.GaugeValue, 1, "same")
	}
}

// TestOneBadSeriesLeavesTheRest: two identical series made the registry
// refuse to gather and every scrape of the node answered 500. Now the
// scrape answers 200 with every good series, and the bad one is logged.
func TestOneBadSeriesLeavesTheRest(t *testing.T) {
	reg := registry()
	reg.MustRegister(twins{prometheus.NewDesc("wsl_gpu_twin", "Repeats.", []string{"pod"}, nil)})
	var log strings.Builder
	var mu sync.Mutex
	s, err := Listen(Options{Addr: "127.0.0.1:0", Limits: DefaultLimits(), Log: slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return log.Write(p)
	}), nil))}, reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Start(context.Background()))
	resp, err := http.Get("http://" + s.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "wsl_gpu_test 1") {
		t.Fatalf("scrape with a repeated series: %s:\n%s", resp.Status, body)
	}
	if n := strings.Count(string(body), `wsl_gpu_twin{pod="same"}`); n != 1 {
		t.Errorf("the repeated series is served %d times, want once", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(log.String(), "wsl_gpu_twin") {
		t.Errorf("the repeated series is not logged: %q", log.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
