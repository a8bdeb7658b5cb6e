package metricsserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/exporter-toolkit/web"
)

// Limits bound what clients can make the server hold.
type Limits struct {
	// ReadHeaderTimeout bounds a connection that says nothing: a
	// scraper sends its request at once.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, the TLS handshake
	// included (a scrape is a GET without a body).
	ReadTimeout time.Duration
	// WriteTimeout bounds answering one request; above ScrapeTimeout, so
	// that the 503 of a scrape that took too long still goes out.
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection no request came on.
	IdleTimeout time.Duration
	// MaxConns is how many connections are held at once; a new one past
	// it takes the place of one that is not serving a request (see the
	// package doc), or is closed when every one is.
	MaxConns int
	// MaxHeaderBytes bounds one request's header.
	MaxHeaderBytes int
	// MaxScrapes is how many scrapes run at once; more are answered 503.
	MaxScrapes int
	// ScrapeTimeout bounds one scrape (promhttp answers 503 after it).
	ScrapeTimeout time.Duration
}

// DefaultLimits are what the commands serve with. A node is scraped by a
// handful of clients (one or two Prometheus replicas, an agent, a person
// with curl), every 15 s to 1 min, each scrape answered at once from the
// latest sample. Each held connection costs a goroutine, its buffers
// and an fd (measured at about 21 KiB plain, TLS more), so 32 of them
// stay near a MiB where 5000 idle ones took over 100 MiB and the chart's
// 128 MiB limit OOM-killed the device plugin with them.
func DefaultLimits() Limits {
	return Limits{
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      15 * time.Second,
		// A scraper every 30 s or faster keeps its connection; one every
		// minute opens a new one, which costs it nothing that matters.
		IdleTimeout:    30 * time.Second,
		MaxConns:       32,
		MaxHeaderBytes: 8 << 10,
		// Two Prometheus replicas and a person at once; each scrape
		// only encodes the latest sample.
		MaxScrapes:    4,
		ScrapeTimeout: 10 * time.Second,
	}
}

// Options say where and how to serve.
type Options struct {
	// Addr is the TCP address to listen on (":9835", "127.0.0.1:9835").
	Addr string
	// WebConfigFile is an exporter-toolkit web configuration (TLS, basic
	// auth, headers), re-read at every request as the toolkit does; ""
	// serves plain HTTP to anyone who can connect.
	WebConfigFile string
	Limits        Limits
	// Log gets the toolkit's lines (TLS on or off, a web configuration
	// that stopped loading) and, at debug, the server's (handshake
	// errors); nil discards them.
	Log *slog.Logger
}

// Server serves one registry at /metrics.
type Server struct {
	ln     net.Listener
	srv    *http.Server
	config string
	log    *slog.Logger
}

// ErrWebConfig is returned by Listen for a web configuration file that
// does not load.
var ErrWebConfig = errors.New("web configuration")

// Listen checks the web configuration and binds opt.Addr, so that both
// fail at start, not at the first scrape.
func Listen(opt Options, g prometheus.Gatherer) (*Server, error) {
	if err := web.Validate(opt.WebConfigFile); err != nil {
		// YAML errors span lines ("unmarshal errors:\n  line 1: ...").
		return nil, fmt.Errorf("%w %s: %s", ErrWebConfig, opt.WebConfigFile, strings.Join(strings.Fields(err.Error()), " "))
	}
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	l := opt.Limits
	mux := http.NewServeMux()
	// A series that does not gather (two alike, an invalid one) is left
	// out and logged; the others are served. HTTPErrorOnError answered
	// 500 for the whole node instead, so anyone who could make one bad
	// series (a pod's name) blinded every dashboard and alert.
	mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{MaxRequestsInFlight: l.MaxScrapes, Timeout: l.ScrapeTimeout,
		ErrorHandling: promhttp.ContinueOnError, ErrorLog: slog.NewLogLogger(opt.Log.Handler(), slog.LevelWarn)}))
	ln, err := net.Listen("tcp", opt.Addr)
	if err != nil {
		return nil, err // "listen tcp ADDR: ..."
	}
	var connState func(net.Conn, http.ConnState)
	if l.MaxConns > 0 {
		g := newGate(ln, l.MaxConns)
		ln, connState = g, g.connState
	}
	return &Server{ln: ln, config: opt.WebConfigFile, log: opt.Log, srv: &http.Server{
		Handler:           mux,
		ConnState:         connState,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(opt.Log.Handler(), slog.LevelDebug),
	}}, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close releases the address of a server that is not served.
func (s *Server) Close() error { return s.ln.Close() }

// Serve serves until ctx ends, then shuts down, giving scrapes under way
// 2 s to finish. It returns nil after ctx ended, else why serving stopped.
func (s *Server) Serve(ctx context.Context) error {
	served := make(chan error, 1)
	go func() {
		systemd := false
		addrs := []string{s.ln.Addr().String()}
		served <- web.Serve(s.ln, s.srv, &web.FlagConfig{WebListenAddresses: &addrs, WebSystemdSocket: &systemd, WebConfigFile: &s.config}, s.log)
	}()
	select {
	case err := <-served:
		return fmt.Errorf("serve metrics: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(shutdown)
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve metrics: %w", err)
	}
	return nil
}

// Start serves in the background, for a daemon whose metrics are a side
// job: a failure to serve is logged, not fatal. stop ends serving and
// returns once scrapes under way finished (Serve's 2 s).
func (s *Server) Start(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := s.Serve(ctx); err != nil {
			s.log.Error("metrics server stopped", "err", err)
		}
	}()
	return func() { cancel(); <-done }
}
