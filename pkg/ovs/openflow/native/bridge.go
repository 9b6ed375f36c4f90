package native

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/ofconn"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// Default timings.
const (
	// DefaultApplyTimeout is the fixed part of an Apply's deadline; DefaultApplyOpTimeout is
	// added for every op (the ofctl backend's defaults).
	DefaultApplyTimeout   = 30 * time.Second
	DefaultApplyOpTimeout = 50 * time.Microsecond
	// DefaultDialTimeout bounds connecting and the handshake.
	DefaultDialTimeout = 5 * time.Second
	// DefaultEchoInterval and DefaultEchoTimeout drive the keepalive of an idle connection.
	DefaultEchoInterval = 5 * time.Second
	DefaultEchoTimeout  = 3 * time.Second
	// flushBytes is how much encoded bundle is buffered before it is written.
	flushBytes = 256 << 10
)

// Delegate serves what the native connection does not: flow dumps, counts and aggregate
// statistics (multipart replies). *ofctl.Bridge implements it.
type Delegate interface {
	DumpFlows(ctx context.Context, filter openflow.FlowFilter) ([]openflow.Flow, error)
	CountFlows(ctx context.Context, filter openflow.FlowFilter) (int, error)
	AggregateStats(ctx context.Context, filter openflow.FlowFilter) (openflow.AggregateStats, error)
}

// Reset describes a connection established after an earlier one was lost (ovs-vswitchd
// restarted, the bridge was re-created, a keepalive went unanswered): the switch may have lost
// every flow and group. It is the connection monitor's type, so both report resets alike.
type Reset = ofconn.Reset

// Bridge implements openflow.Bridge over one persistent OpenFlow 1.5 connection to the
// switch (its management socket): every Apply is one atomic, ordered bundle of flow and group
// mods, encoded byte-for-byte as `ovs-ofctl -O OpenFlow15 bundle` encodes the ofctl backend's
// text. Dumps, counts and conntrack flushes go to the Delegate.
type Bridge struct {
	target   string
	delegate Delegate
	opts     options

	applyMu sync.Mutex // one bundle at a time

	mu        sync.Mutex // guards the fields below
	c         *conn
	bundleID  uint32
	everUp    bool
	connected bool
	since     time.Time
	dpid      uint64
	lastReset Reset
	hasReset  bool
	// quietLoss is set when this side closed the last connection (Close, or an Apply its
	// caller cancelled): the next connection is no reset.
	quietLoss bool
	resets    chan struct{}
}

var (
	_ openflow.Bridge      = (*Bridge)(nil)
	_ openflow.FlowCounter = (*Bridge)(nil)
)

type options struct {
	applyBase, applyPerOp  time.Duration
	dialTimeout            time.Duration
	conn                   connOptions
	minBackoff, maxBackoff time.Duration
	maxMessageLen          int
}

// Option tunes New.
type Option func(*options)

// WithApplyTimeout sets an Apply's deadline to base + perOp × len(ops); zero keeps a default.
func WithApplyTimeout(base, perOp time.Duration) Option {
	return func(o *options) {
		if base > 0 {
			o.applyBase = base
		}
		if perOp > 0 {
			o.applyPerOp = perOp
		}
	}
}

// WithKeepalive sets the echo interval and timeout of an idle connection; zero keeps a default.
func WithKeepalive(interval, timeout time.Duration) Option {
	return func(o *options) {
		if interval > 0 {
			o.conn.echoInterval = interval
		}
		if timeout > 0 {
			o.conn.echoTimeout = timeout
		}
	}
}

// withMaxMessageLen lowers the size limit of one message, for tests of split groups.
func withMaxMessageLen(n int) Option { return func(o *options) { o.maxMessageLen = n } }

// New returns a Bridge for target ("unix:<rundir>/<bridge>.mgmt" or "tcp:<host>:<port>"). It
// connects on the first Apply, or when Run starts. delegate serves DumpFlows, CountFlows and
// AggregateStats; nil makes them fail.
func New(target string, delegate Delegate, opts ...Option) *Bridge {
	o := options{applyBase: DefaultApplyTimeout, applyPerOp: DefaultApplyOpTimeout, dialTimeout: DefaultDialTimeout,
		conn:       connOptions{echoInterval: DefaultEchoInterval, echoTimeout: DefaultEchoTimeout, writeTimeout: DefaultApplyTimeout},
		minBackoff: 100 * time.Millisecond, maxBackoff: time.Second, maxMessageLen: maxMessageLen}
	for _, f := range opts {
		f(&o)
	}
	return &Bridge{target: target, delegate: delegate, opts: o, since: time.Now(), resets: make(chan struct{}, 1)}
}

// Target returns the OpenFlow endpoint.
func (b *Bridge) Target() string { return b.target }

// Resets receives a value each time a connection is established after an earlier one was
// lost (never for the first). Sends coalesce; LastReset describes the latest.
func (b *Bridge) Resets() <-chan struct{} { return b.resets }

// LastReset returns the latest reset, if there was one.
func (b *Bridge) LastReset() (Reset, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lastReset, b.hasReset
}

// Connected reports whether the connection is up, and since when it has been in that state.
func (b *Bridge) Connected() (bool, time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.noticeLossLocked()
	return b.connected, b.since
}

// noticeLossLocked records that the current connection ended.
func (b *Bridge) noticeLossLocked() {
	if b.c != nil && !b.c.alive() {
		klog.InfoS("Lost the OpenFlow 1.5 connection to the switch", "target", b.target, "err", b.c.err)
		b.c = nil
		b.connected, b.since = false, time.Now()
	}
}

// connection returns the live connection, dialling one when there is none.
func (b *Bridge) connection(ctx context.Context) (*conn, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.noticeLossLocked()
	if b.c != nil {
		return b.c, nil
	}
	dctx, cancel := context.WithTimeout(ctx, b.opts.dialTimeout)
	defer cancel()
	c, err := dial(dctx, b.target, b.opts.conn)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	prev, wasUp, down := b.dpid, b.everUp && !b.quietLoss, now.Sub(b.since)
	b.c, b.connected, b.since, b.dpid, b.everUp, b.quietLoss = c, true, now, c.dpid, true, false
	if !wasUp {
		klog.InfoS("Connected to the OpenFlow switch (OpenFlow 1.5)", "target", b.target, "datapathID", fmt.Sprintf("%016x", c.dpid))
		return c, nil
	}
	b.lastReset = Reset{At: now, Down: down, DatapathID: c.dpid, PreviousDatapathID: prev, Count: b.lastReset.Count + 1}
	b.hasReset = true
	klog.InfoS("Reconnected to the OpenFlow switch: it may have lost its flows", "target", b.target, "down", down,
		"datapathID", fmt.Sprintf("%016x", c.dpid), "previousDatapathID", fmt.Sprintf("%016x", prev), "resets", b.lastReset.Count)
	select {
	case b.resets <- struct{}{}:
	default:
	}
	return c, nil
}

// Run keeps the connection open until ctx ends, reconnecting with a backoff (100 ms doubling
// to 1 s) so that a loss is noticed, and reported on Resets, without waiting for an Apply.
// Then it closes the connection.
func (b *Bridge) Run(ctx context.Context) {
	backoff := b.opts.minBackoff
	for ctx.Err() == nil {
		c, err := b.connection(ctx)
		if err != nil {
			klog.V(2).InfoS("Cannot connect to the OpenFlow switch, retrying", "target", b.target, "retryIn", backoff, "err", err)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
			backoff = min(2*backoff, b.opts.maxBackoff)
			continue
		}
		backoff = b.opts.minBackoff
		select {
		case <-c.done:
		case <-ctx.Done():
		}
	}
	b.Close()
}

// Close closes the connection; a later Apply opens a new one.
func (b *Bridge) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.c != nil {
		b.c.close()
		b.c = nil
		b.connected, b.since, b.quietLoss = false, time.Now(), true
	}
}

// closeQuietly closes c (if it is still the current connection) after its caller gave up:
// the next connection is no reset.
func (b *Bridge) closeQuietly(c *conn, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c.fail(err)
	if b.c == c {
		b.c = nil
		b.connected, b.since, b.quietLoss = false, time.Now(), true
	}
}

// DumpFlows returns the delegate's dump.
func (b *Bridge) DumpFlows(ctx context.Context, filter openflow.FlowFilter) ([]openflow.Flow, error) {
	if b.delegate == nil {
		return nil, errors.New("native openflow bridge: no delegate for flow dumps")
	}
	return b.delegate.DumpFlows(ctx, filter)
}

// CountFlows returns the delegate's count.
func (b *Bridge) CountFlows(ctx context.Context, filter openflow.FlowFilter) (int, error) {
	if b.delegate == nil {
		return 0, errors.New("native openflow bridge: no delegate for flow counts")
	}
	return b.delegate.CountFlows(ctx, filter)
}

// AggregateStats returns the delegate's aggregate statistics.
func (b *Bridge) AggregateStats(ctx context.Context, filter openflow.FlowFilter) (openflow.AggregateStats, error) {
	if b.delegate == nil {
		return openflow.AggregateStats{}, errors.New("native openflow bridge: no delegate for aggregate statistics")
	}
	return b.delegate.AggregateStats(ctx, filter)
}
