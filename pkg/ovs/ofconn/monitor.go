package ofconn

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// MonitorOptions tune a Monitor. Zero values take the defaults.
type MonitorOptions struct {
	// Conn tunes each connection (echo keepalive: a wedged switch is declared lost after
	// Conn.EchoInterval + Conn.EchoTimeout).
	Conn Options
	// MinBackoff is the wait after the first failed connection attempt; it doubles after each
	// further failure up to MaxBackoff. Defaults 100 ms and 1 s.
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// DialTimeout bounds one connection attempt with its handshake. Default 5 s.
	DialTimeout time.Duration
}

func (o MonitorOptions) withDefaults() MonitorOptions {
	if o.MinBackoff <= 0 {
		o.MinBackoff = 100 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = time.Second
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = o.MinBackoff
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 5 * time.Second
	}
	// Packet-ins of controller actions reach every connection to the management socket; the
	// monitor discards them, so it needs no queue.
	o.Conn.PacketInQueue = 1
	return o
}

// Reset describes a connection established after an earlier one was lost: ovs-vswitchd
// restarted, the bridge was re-created, or the connection broke (a wedged switch that missed
// its keepalive). The switch may have lost every flow and group.
type Reset struct {
	// At is when the new connection was established.
	At time.Time
	// Down is how long no connection was up.
	Down time.Duration
	// DatapathID is the bridge's datapath ID on the new connection; PreviousDatapathID the one
	// on the lost connection. They differ when the bridge was re-created with another ID.
	DatapathID         uint64
	PreviousDatapathID uint64
	// Count numbers the resets since the monitor started (1 for the first).
	Count int
}

// DatapathChanged reports whether the bridge came back with another datapath ID.
func (r Reset) DatapathChanged() bool { return r.DatapathID != r.PreviousDatapathID }

// Monitor keeps one OpenFlow connection to a bridge open (its management socket), reconnects
// when it drops, and reports each reconnection after a loss on Resets: the signal that the
// switch may have lost its state and that its owners should reinstall it.
type Monitor struct {
	addr   string
	opts   MonitorOptions
	resets chan struct{}

	mu        sync.Mutex
	connected bool
	since     time.Time
	dpid      uint64
	everUp    bool
	lastReset Reset
	hasReset  bool
}

// NewMonitor returns a Monitor of the OpenFlow endpoint addr (see Dial). It connects when Run
// is called.
func NewMonitor(addr string, opts MonitorOptions) *Monitor {
	return &Monitor{addr: addr, opts: opts.withDefaults(), resets: make(chan struct{}, 1), since: time.Now()}
}

// Resets receives a value each time a connection is established after an earlier one was
// lost (never for the first connection). Sends do not block and coalesce: a reader that
// falls behind sees one value for several resets; LastReset describes the latest.
func (m *Monitor) Resets() <-chan struct{} { return m.resets }

// Connected reports whether a connection is up, and since when the monitor has been in that
// state (for a monitor that never connected: since NewMonitor).
func (m *Monitor) Connected() (bool, time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.connected, m.since
}

// DatapathID is the bridge's datapath ID from the latest connection (0 before the first).
func (m *Monitor) DatapathID() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dpid
}

// LastReset returns the latest reset, if there was one.
func (m *Monitor) LastReset() (Reset, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lastReset, m.hasReset
}

// Run connects and keeps a connection open until ctx ends, then closes it and returns.
func (m *Monitor) Run(ctx context.Context) {
	backoff := m.opts.MinBackoff
	failures := 0
	for ctx.Err() == nil {
		dctx, cancel := context.WithTimeout(ctx, m.opts.DialTimeout)
		c, err := Dial(dctx, m.addr, m.opts.Conn)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			failures++
			if failures == 1 {
				klog.InfoS("Cannot connect to the OpenFlow switch, retrying", "addr", m.addr, "err", err)
			} else {
				klog.V(4).InfoS("Cannot connect to the OpenFlow switch", "addr", m.addr, "attempts", failures, "err", err)
			}
			if !sleepCtx(ctx, backoff) {
				break
			}
			backoff = min(2*backoff, m.opts.MaxBackoff)
			continue
		}
		backoff, failures = m.opts.MinBackoff, 0
		m.up(c)
		go discardPacketIns(c)
		select {
		case <-c.Done():
			m.down()
			klog.InfoS("Lost the OpenFlow connection to the switch", "addr", m.addr, "err", c.Err())
		case <-ctx.Done():
			_ = c.Close()
		}
	}
	m.down()
}

// up records a new connection and signals a reset when an earlier one was lost.
func (m *Monitor) up(c *Conn) {
	now := time.Now()
	m.mu.Lock()
	prev, wasUp := m.dpid, m.everUp
	down := now.Sub(m.since)
	m.connected, m.since, m.dpid, m.everUp = true, now, c.Features().DatapathID, true
	var r Reset
	if wasUp {
		r = Reset{At: now, Down: down, DatapathID: m.dpid, PreviousDatapathID: prev, Count: m.lastReset.Count + 1}
		m.lastReset, m.hasReset = r, true
	}
	m.mu.Unlock()
	if !wasUp {
		klog.InfoS("Connected to the OpenFlow switch", "addr", m.addr, "datapathID", formatDPID(m.dpid))
		return
	}
	klog.InfoS("Reconnected to the OpenFlow switch: it may have lost its flows", "addr", m.addr, "down", down,
		"datapathID", formatDPID(r.DatapathID), "previousDatapathID", formatDPID(r.PreviousDatapathID),
		"datapathChanged", r.DatapathChanged(), "resets", r.Count)
	select {
	case m.resets <- struct{}{}:
	default:
	}
}

func (m *Monitor) down() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.connected {
		m.connected, m.since = false, time.Now()
	}
}

func formatDPID(id uint64) string { return fmt.Sprintf("%016x", id) }

// discardPacketIns drains c's packet-ins until it ends: the monitor only watches the connection.
func discardPacketIns(c *Conn) {
	for pi := range c.PacketIns() {
		_ = pi
	}
}

// sleepCtx waits d or until ctx ends; it reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
