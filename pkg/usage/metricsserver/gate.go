package metricsserver

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// gate holds at most max connections and makes room for a new one by
// closing one that is not serving a request: a connection that has not
// sent a whole request header yet (silent, or still in its TLS
// handshake), or a keep-alive one waiting for its next request. The
// source address holding the most connections gives up its oldest such
// one. So a flood of silent connections, however many and however
// renewed, takes turns with itself, and a scraper that connects gets its
// connection and sends its request at once. (netutil.LimitListener
// instead stopped accepting at max: 32 silent connections renewed every
// ReadHeaderTimeout kept every scraper waiting in the accept queue.)
type gate struct {
	net.Listener
	max int

	mu    sync.Mutex
	conns map[*gatedConn]struct{}
}

func newGate(ln net.Listener, max int) *gate {
	return &gate{Listener: ln, max: max, conns: map[*gatedConn]struct{}{}}
}

// gatedConn is one held connection.
type gatedConn struct {
	net.Conn
	g    *gate
	host string
	// busy: a request header came and is being answered; since: when it
	// last stopped being busy (or was accepted). Both under g.mu.
	busy  bool
	since time.Time
	once  sync.Once
}

// Close releases the connection's place.
func (c *gatedConn) Close() error {
	c.once.Do(func() {
		c.g.mu.Lock()
		delete(c.g.conns, c)
		c.g.mu.Unlock()
	})
	return c.Conn.Close()
}

// Accept accepts the next connection; at max, it closes one that is
// not serving a request, or, when every one is, the new one.
func (g *gate) Accept() (net.Conn, error) {
	for {
		nc, err := g.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c := &gatedConn{Conn: nc, g: g, host: host(nc.RemoteAddr()), since: time.Now()}
		g.mu.Lock()
		var victim *gatedConn
		if len(g.conns) >= g.max {
			victim = g.victim()
		}
		admit := len(g.conns) < g.max || victim != nil
		if victim != nil {
			delete(g.conns, victim)
		}
		if admit {
			g.conns[c] = struct{}{}
		}
		g.mu.Unlock()
		if victim != nil {
			victim.Close()
		}
		if admit {
			return c, nil
		}
		nc.Close()
	}
}

// victim is the oldest idle connection of the source holding the most
// connections, nil when every connection is serving a request. Under
// g.mu; a few dozen connections, so a scan.
func (g *gate) victim() *gatedConn {
	held := map[string]int{}
	for c := range g.conns {
		held[c.host]++
	}
	var v *gatedConn
	for c := range g.conns {
		if c.busy {
			continue
		}
		if v == nil || held[c.host] > held[v.host] || held[c.host] == held[v.host] && c.since.Before(v.since) {
			v = c
		}
	}
	return v
}

// connState is the server's ConnState hook: it tells which connections
// are serving a request (StateActive comes once a whole request header
// was read).
func (g *gate) connState(nc net.Conn, st http.ConnState) {
	for {
		if c, ok := nc.(*gatedConn); ok {
			g.mu.Lock()
			switch st {
			case http.StateActive:
				c.busy = true
			case http.StateIdle:
				c.busy, c.since = false, time.Now()
			}
			g.mu.Unlock()
			return
		}
		// TLS: the server's connection wraps ours.
		w, ok := nc.(interface{ NetConn() net.Conn })
		if !ok {
			return
		}
		nc = w.NetConn()
	}
}

// host is a connection's source address without its port.
func host(a net.Addr) string {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.IP.String()
	}
	return a.String()
}
