package native

import (
	"context"
	"errors"
	"sync"
	"time"

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
// every flow and group. It is the ofconn.Monitor's: the bridge's connection is kept by one.
type Reset = ofconn.Reset

// Bridge implements openflow.Bridge over one persistent OpenFlow 1.5 connection to the
// switch (its management socket, kept by an ofconn.Monitor): every Apply is one atomic,
// ordered bundle of flow and group mods, encoded byte-for-byte as `ovs-ofctl -O OpenFlow15
// bundle` encodes the ofctl backend's text. Flow dumps, counts and aggregate statistics go to
// the Delegate.
type Bridge struct {
	target   string
	delegate Delegate
	opts     options
	mon      *ofconn.Monitor

	applyMu sync.Mutex // one bundle at a time

	mu       sync.Mutex // guards bundleID
	bundleID uint32
}

var (
	_ openflow.Bridge      = (*Bridge)(nil)
	_ openflow.FlowCounter = (*Bridge)(nil)
)

type options struct {
	applyBase, applyPerOp time.Duration
	mon                   ofconn.MonitorOptions
	maxMessageLen         int
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
			o.mon.Conn.EchoInterval = interval
		}
		if timeout > 0 {
			o.mon.Conn.EchoTimeout = timeout
		}
	}
}

// withMaxMessageLen lowers the size limit of one message, for tests of split groups.
func withMaxMessageLen(n int) Option { return func(o *options) { o.maxMessageLen = n } }

// New returns a Bridge for target ("unix:<rundir>/<bridge>.mgmt" or "tcp:<host>:<port>"). It
// connects on the first Apply, or when Run starts. delegate serves DumpFlows, CountFlows and
// AggregateStats; nil makes them fail.
func New(target string, delegate Delegate, opts ...Option) *Bridge {
	o := options{applyBase: DefaultApplyTimeout, applyPerOp: DefaultApplyOpTimeout, maxMessageLen: maxMessageLen,
		mon: ofconn.MonitorOptions{DialTimeout: DefaultDialTimeout, MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second,
			Conn: ofconn.Options{Version: ofconn.Version15, EchoInterval: DefaultEchoInterval, EchoTimeout: DefaultEchoTimeout,
				WriteTimeout: DefaultApplyTimeout, HandshakeTimeout: DefaultDialTimeout}}}
	for _, f := range opts {
		f(&o)
	}
	return &Bridge{target: target, delegate: delegate, opts: o, mon: ofconn.NewMonitor(target, o.mon)}
}

// Target returns the OpenFlow endpoint.
func (b *Bridge) Target() string { return b.target }

// Resets receives a value each time a connection is established after an earlier one was
// lost (never for the first). Sends coalesce; LastReset describes the latest.
func (b *Bridge) Resets() <-chan struct{} { return b.mon.Resets() }

// LastReset returns the latest reset, if there was one.
func (b *Bridge) LastReset() (Reset, bool) { return b.mon.LastReset() }

// Connected reports whether the connection is up, and since when it has been in that state.
func (b *Bridge) Connected() (bool, time.Time) { return b.mon.Connected() }

// connection returns the live connection, dialling one when there is none.
func (b *Bridge) connection(ctx context.Context) (*ofconn.Conn, error) { return b.mon.Conn(ctx) }

// Run keeps the connection open until ctx ends, reconnecting with a backoff (100 ms doubling
// to 1 s) so that a loss is noticed, and reported on Resets, without waiting for an Apply.
// Then it closes the connection.
func (b *Bridge) Run(ctx context.Context) { b.mon.Run(ctx) }

// Close closes the connection; a later Apply opens a new one, which is no reset.
func (b *Bridge) Close() { b.mon.Close() }

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
