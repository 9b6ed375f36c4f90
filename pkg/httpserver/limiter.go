package httpserver

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
)

// Limiter applies one set of Limits to the servers and listeners it makes: the connection cap
// is shared by every listener it wraps (e.g. all healthCheckNodePorts of a node), and it
// counts open and rejected connections for its metrics.
type Limiter struct {
	name     string
	limits   Limits
	open     atomic.Int64
	rejected atomic.Uint64
}

// NewLimiter returns a limiter named name (its metrics' server label) with limits, zero fields
// defaulted. Invalid limits are an error.
func NewLimiter(name string, limits Limits) (*Limiter, error) {
	limits.Defaults()
	if err := limits.Validate(); err != nil {
		return nil, fmt.Errorf("HTTP server %s: %w", name, err)
	}
	return &Limiter{name: name, limits: limits}, nil
}

// DefaultLimiter returns a limiter with the default limits.
func DefaultLimiter(name string) *Limiter {
	var l Limits
	l.Defaults()
	return &Limiter{name: name, limits: l}
}

// Name is the limiter's name.
func (l *Limiter) Name() string { return l.name }

// Limits returns the limits in effect.
func (l *Limiter) Limits() Limits { return l.limits }

// Open is the number of connections open now on the limiter's listeners.
func (l *Limiter) Open() int { return int(l.open.Load()) }

// Rejected is the number of connections closed because the cap was reached.
func (l *Limiter) Rejected() uint64 { return l.rejected.Load() }

// Server returns an http.Server for h with the limiter's timeouts.
func (l *Limiter) Server(h http.Handler) *http.Server { return l.limits.server(h) }

// Listener wraps ln so that connections above the cap are closed as soon as they are
// accepted (the client sees its connection closed, not a queue).
func (l *Limiter) Listener(ln net.Listener) net.Listener { return &limitListener{Listener: ln, l: l} }

type limitListener struct {
	net.Listener
	l *Limiter
}

func (ll *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := ll.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if ll.l.open.Add(1) <= int64(ll.l.limits.MaxConnections) {
			return &limitConn{Conn: c, l: ll.l}, nil
		}
		ll.l.open.Add(-1)
		if n := ll.l.rejected.Add(1); n&(n-1) == 0 { // log the 1st, 2nd, 4th, 8th... rejection
			klog.InfoS("Too many HTTP connections; closing new ones", "server", ll.l.name, "max", ll.l.limits.MaxConnections,
				"rejected", n, "remote", c.RemoteAddr().String())
		}
		_ = c.Close()
	}
}

// limitConn gives its slot back when closed (once).
type limitConn struct {
	net.Conn
	l    *Limiter
	once sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}

// Collector returns the limiters' metrics: namespace_http_open_connections and
// namespace_http_connections_rejected_total, labelled server=<limiter name>.
func Collector(namespace string, limiters ...*Limiter) prometheus.Collector {
	return &collector{limiters: limiters,
		open: prometheus.NewDesc(prometheus.BuildFQName(namespace, "http", "open_connections"),
			"Connections open now on the HTTP servers (health, metrics, health check NodePorts), by server.", []string{"server"}, nil),
		rejected: prometheus.NewDesc(prometheus.BuildFQName(namespace, "http", "connections_rejected_total"),
			"Connections closed at once because the server's connection cap was reached, by server.", []string{"server"}, nil),
	}
}

type collector struct {
	limiters       []*Limiter
	open, rejected *prometheus.Desc
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.open
	ch <- c.rejected
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	for _, l := range c.limiters {
		ch <- prometheus.MustNewConstMetric(c.open, prometheus.GaugeValue, float64(l.Open()), l.name)
		ch <- prometheus.MustNewConstMetric(c.rejected, prometheus.CounterValue, float64(l.Rejected()), l.name)
	}
}
