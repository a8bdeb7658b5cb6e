// Package metricsserver serves a Prometheus registry at /metrics with
// limits a hostile or careless client cannot get past: `wsl-gpu-ctl
// metrics` and the device plugin serve through it. The plugin runs on
// every node under a memory limit and also serves the kubelet, so what a
// client can make it hold must be bounded.
//
// # Model
//
// Listen checks the web configuration and binds the address; Serve serves
// until its context ends. At most MaxConns connections are held: past
// it, a new connection takes the place of one that is not serving a
// request (one that has not sent a whole request header, in its TLS
// handshake or silent, or a keep-alive one between requests), the
// oldest of the source address holding the most, and is closed itself
// only when every held one is serving. A flood of silent connections
// therefore takes turns with itself while a scraper, which sends its
// request as soon as it connects, is answered at once; stopping to
// accept at the limit instead let 32 silent connections, renewed every
// ReadHeaderTimeout, keep every scraper waiting in the kernel's accept
// queue. A connection that sends no request is closed after
// ReadHeaderTimeout, a keep-alive one after IdleTimeout without a
// request; reads, writes and headers are bounded; at most MaxScrapes
// scrapes run at once (more are answered 503). DefaultLimits says why
// each value is what it is.
//
// A series that does not gather (two alike, an invalid one) is left out
// of the answer and logged at warn: the other series are still served,
// so no one series can fail the whole node's scrape.
//
// # TLS and authentication
//
// The web configuration file is the one every Prometheus exporter takes
// (github.com/prometheus/exporter-toolkit: tls_server_config,
// basic_auth_users with bcrypt hashes, http_server_config headers,
// rate_limit), re-read at every request, so certificates and users
// change without a restart. Without one the server speaks plain HTTP to
// whoever can reach the address: bind it to loopback, or keep it to the
// scrapers with a network policy.
//
// # When not to use it
//
// The hook never links it (no network on a container start).
package metricsserver
