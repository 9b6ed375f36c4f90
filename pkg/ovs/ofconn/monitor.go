package ofconn

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

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

// Monitor keeps one OpenFlow connection to a bridge (its management socket) for requests: Conn
// returns the live connection or dials one, Run reconnects with a backoff when it drops, and
// each connection established after a loss is reported on Resets: the signal that the switch
// may have lost its state and that its owners should reinstall it. A connection this side
// closed (Close, CloseQuietly) is no loss.
type Monitor struct {
	addr   string
	opts   MonitorOptions
	resets chan struct{}

	dialMu sync.Mutex // one dial at a time

	mu        sync.Mutex // guards the fields below
	c         *Conn
	connected bool
	since     time.Time
	dpid      uint64
	everUp    bool
	quietLoss bool // this side closed the last connection: the next one is no reset
	lastReset Reset
	hasReset  bool
}

// NewMonitor returns a Monitor of the OpenFlow endpoint addr (see Dial). It connects when Run
// starts or Conn is first called.
func NewMonitor(addr string, opts MonitorOptions) *Monitor {
	return &Monitor{addr: addr, opts: opts.Defaults(), resets: make(chan struct{}, 1), since: time.Now()}
}

// Addr returns the OpenFlow endpoint.
func (m *Monitor) Addr() string { return m.addr }

// Resets receives a value each time a connection is established after an earlier one was
// lost (never for the first connection). Sends do not block and coalesce: a reader that
// falls behind sees one value for several resets; LastReset describes the latest.
func (m *Monitor) Resets() <-chan struct{} { return m.resets }

// Connected reports whether a connection is up, and since when the monitor has been in that
// state (for a monitor that never connected: since NewMonitor).
func (m *Monitor) Connected() (bool, time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.noticeLossLocked()
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

// noticeLossLocked records that the current connection ended.
func (m *Monitor) noticeLossLocked() {
	if m.c != nil && !m.c.Alive() {
		klog.InfoS("Lost the OpenFlow connection to the switch", "addr", m.addr, "err", m.c.err)
		m.c = nil
		m.connected, m.since = false, time.Now()
	}
}

// current returns the live connection, or nil.
func (m *Monitor) current() *Conn {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.noticeLossLocked()
	return m.c
}

// Conn returns the live connection, dialling one (within ctx and DialTimeout) when there is
// none.
func (m *Monitor) Conn(ctx context.Context) (*Conn, error) {
	if c := m.current(); c != nil {
		return c, nil
	}
	m.dialMu.Lock()
	defer m.dialMu.Unlock()
	if c := m.current(); c != nil {
		return c, nil
	}
	dctx, cancel := context.WithTimeout(ctx, m.opts.DialTimeout)
	defer cancel()
	c, err := Dial(dctx, m.addr, m.opts.Conn)
	if err != nil {
		return nil, err
	}
	m.up(c)
	return c, nil
}

// up records a new connection and signals a reset when an earlier one was lost.
func (m *Monitor) up(c *Conn) {
	now := time.Now()
	m.mu.Lock()
	prev, wasUp, down := m.dpid, m.everUp && !m.quietLoss, now.Sub(m.since)
	m.c, m.connected, m.since, m.dpid, m.everUp, m.quietLoss = c, true, now, c.Features().DatapathID, true, false
	var r Reset
	if wasUp {
		r = Reset{At: now, Down: down, DatapathID: m.dpid, PreviousDatapathID: prev, Count: m.lastReset.Count + 1}
		m.lastReset, m.hasReset = r, true
	}
	m.mu.Unlock()
	if !wasUp {
		klog.InfoS("Connected to the OpenFlow switch", "addr", m.addr, "version", versionName(c.Version()),
			"datapathID", formatDPID(c.Features().DatapathID))
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

// Run keeps a connection open until ctx ends, reconnecting with a backoff (MinBackoff doubling
// to MaxBackoff) so that a loss is noticed, and reported on Resets, without waiting for a
// request. Then it closes the connection and returns.
func (m *Monitor) Run(ctx context.Context) {
	backoff := Backoff{Min: m.opts.MinBackoff, Max: m.opts.MaxBackoff}
	failures := 0
	for ctx.Err() == nil {
		c, err := m.Conn(ctx)
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
			if !backoff.Wait(ctx) {
				break
			}
			continue
		}
		backoff.Reset()
		failures = 0
		select {
		case <-c.Done():
			m.current() // records the loss now
		case <-ctx.Done():
		}
	}
	m.Close()
}

// Close closes the connection; the next one (Conn, Run) is no reset.
func (m *Monitor) Close() {
	m.mu.Lock()
	c := m.c
	m.mu.Unlock()
	if c != nil {
		m.CloseQuietly(c, fmt.Errorf("closed"))
	}
}

// CloseQuietly closes c with err after its user gave up on it (a request its caller
// cancelled, whose state on the switch is unknown): when c is the current connection, the
// next one is no reset, as the switch lost nothing.
func (m *Monitor) CloseQuietly(c *Conn, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c.CloseWithError(err)
	if m.c == c {
		m.c = nil
		m.connected, m.since, m.quietLoss = false, time.Now(), true
	}
}

func formatDPID(id uint64) string { return fmt.Sprintf("%016x", id) }
