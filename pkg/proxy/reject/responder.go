package reject

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/ofconn"
)

// FromFlows accepts packet-ins sent by a controller action (reason action) of a flow in table
// whose cookie, masked with cookieMask, equals cookie.
func FromFlows(table uint8, cookie, cookieMask uint64) func(*ofconn.PacketIn) bool {
	return func(pi *ofconn.PacketIn) bool {
		return pi.Reason == ofconn.ReasonAction && pi.TableID == table && pi.Cookie&cookieMask == cookie&cookieMask
	}
}

// PacketConn is the OpenFlow connection a Responder serves.
type PacketConn interface {
	// PacketIns delivers packet-ins; it is closed when the connection ends.
	PacketIns() <-chan *ofconn.PacketIn
	SendPacketOut(ofconn.PacketOut) error
}

// Config tunes a Responder. Zero values take the defaults.
type Config struct {
	// Accept selects the packet-ins to answer; others are ignored. Default: every packet-in
	// with reason action.
	Accept func(*ofconn.PacketIn) bool
	// Rate is how many replies per second the responder sends at most, on average, to every
	// client together. Default DefaultRate: every Service port without endpoints and every
	// undefined port of every ClusterIP shares it.
	Rate float64
	// Burst is how many replies may go out at once above Rate. Default DefaultBurst.
	Burst int
	// SourceRate is how many replies per second one client address gets at most, on average,
	// so that one client flooding cannot use up the others' refusals. Default
	// DefaultSourceRate.
	SourceRate float64
	// SourceBurst is how many replies one client address may get at once above SourceRate.
	// Default DefaultSourceBurst.
	SourceBurst int
	// Sources is the number of per-client buckets (a fixed table: clients hashing to the same
	// slot share one). Default DefaultSources.
	Sources int
	// Now is the clock, for tests. Default time.Now.
	Now func() time.Time
}

// Defaults of Config.
const (
	DefaultRate        = 1000
	DefaultBurst       = 500
	DefaultSourceRate  = 250
	DefaultSourceBurst = 125
	DefaultSources     = 4096
)

// Stats counts what a Responder did with the packet-ins it saw.
type Stats struct {
	Received    uint64
	Ignored     uint64 // not accepted by Config.Accept
	NoReply     uint64 // not a packet to answer, or malformed
	RateLimited uint64 // the global Rate was used up
	// SourceLimited counts refusals not sent because the client's own share (SourceRate) was
	// used up.
	SourceLimited uint64
	Replied       uint64
	SendFailed    uint64
}

// Responder answers packet-ins for Services without endpoints. It is safe for concurrent use.
type Responder struct {
	accept  func(*ofconn.PacketIn) bool
	limiter *fairLimiter
	stats   struct {
		received, ignored, noReply, rateLimited, sourceLimited, replied, sendFailed atomic.Uint64
	}
}

// New builds a Responder.
func New(cfg Config) *Responder {
	if cfg.Accept == nil {
		cfg.Accept = func(pi *ofconn.PacketIn) bool { return pi.Reason == ofconn.ReasonAction }
	}
	cfg.Rate = cmp.Or(max(cfg.Rate, 0), DefaultRate)
	cfg.Burst = cmp.Or(max(cfg.Burst, 0), DefaultBurst)
	cfg.SourceRate = cmp.Or(max(cfg.SourceRate, 0), DefaultSourceRate)
	cfg.SourceBurst = cmp.Or(max(cfg.SourceBurst, 0), DefaultSourceBurst)
	cfg.Sources = cmp.Or(max(cfg.Sources, 0), DefaultSources)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Responder{accept: cfg.Accept,
		limiter: newFairLimiter(cfg.Rate, cfg.Burst, cfg.SourceRate, cfg.SourceBurst, cfg.Sources, cfg.Now)}
}

// Stats returns the counters.
func (r *Responder) Stats() Stats {
	s := &r.stats
	return Stats{Received: s.received.Load(), Ignored: s.ignored.Load(), NoReply: s.noReply.Load(),
		RateLimited: s.rateLimited.Load(), SourceLimited: s.sourceLimited.Load(), Replied: s.replied.Load(), SendFailed: s.sendFailed.Load()}
}

// Handle answers one packet-in on conn and says what it sent.
func (r *Responder) Handle(conn PacketConn, pi *ofconn.PacketIn) (Kind, error) {
	r.stats.received.Add(1)
	if !r.accept(pi) {
		r.stats.ignored.Add(1)
		return KindNone, nil
	}
	if pi.InPort == ofconn.PortAny || pi.InPort == ofconn.PortController {
		r.stats.noReply.Add(1)
		return KindNone, noReply("packet-in has no usable in_port (0x%x)", pi.InPort)
	}
	reply, kind, err := BuildReply(pi.Data)
	if err != nil {
		r.stats.noReply.Add(1)
		return KindNone, err
	}
	switch r.limiter.allow(sourceOf(pi.Data)) {
	case limitSource:
		r.stats.sourceLimited.Add(1)
		return KindNone, errSourceLimited
	case limitGlobal:
		r.stats.rateLimited.Add(1)
		return KindNone, errRateLimited
	}
	if err := conn.SendPacketOut(ofconn.PacketOut{InPort: ofconn.PortController, Outputs: []uint32{pi.InPort}, Data: reply}); err != nil {
		r.stats.sendFailed.Add(1)
		return KindNone, fmt.Errorf("sending %s to port %d: %w", kind, pi.InPort, err)
	}
	r.stats.replied.Add(1)
	return kind, nil
}

var (
	errRateLimited   = errors.New("reply rate limit reached")
	errSourceLimited = errors.New("reply rate limit of the client address reached")
)

// Serve answers the packet-ins of conn until ctx ends or the connection closes its
// PacketIns channel.
func (r *Responder) Serve(ctx context.Context, conn PacketConn) {
	for {
		select {
		case <-ctx.Done():
			return
		case pi, ok := <-conn.PacketIns():
			if !ok {
				return
			}
			kind, err := r.Handle(conn, pi)
			switch {
			case errors.Is(err, ErrNoReply), errors.Is(err, errRateLimited), errors.Is(err, errSourceLimited):
				klog.V(4).InfoS("Not rejecting packet", "inPort", pi.InPort, "table", pi.TableID, "reason", err)
			case err != nil:
				klog.ErrorS(err, "Failed to reject a connection to a Service without endpoints", "inPort", pi.InPort)
			case kind != KindNone:
				klog.V(4).InfoS("Rejected a connection to a Service without endpoints", "reply", kind, "inPort", pi.InPort)
			}
		}
	}
}

// Conn is a PacketConn that can be closed and says why it ended.
type Conn interface {
	PacketConn
	Close() error
	Err() error
}

// Dialer opens a connection.
type Dialer func(ctx context.Context) (Conn, error)

// DialOpenFlow dials an OpenFlow endpoint with pkg/ovs/ofconn, e.g. the bridge's management
// socket unix:<rundir>/<bridge>.mgmt.
func DialOpenFlow(addr string, opts ofconn.Options) Dialer {
	return func(ctx context.Context) (Conn, error) {
		c, err := ofconn.Dial(ctx, addr, opts)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
}

// Run serves connections from dial until ctx ends, reconnecting with a backoff (from 100 ms
// up to 10 s) when the connection fails or ends.
func (r *Responder) Run(ctx context.Context, dial Dialer) {
	backoff := ofconn.Backoff{Min: 100 * time.Millisecond, Max: 10 * time.Second}
	for ctx.Err() == nil {
		conn, err := dial(ctx)
		if err != nil {
			klog.ErrorS(err, "Reject responder cannot connect to OpenFlow; retrying", "backoff", backoff.Current())
		} else {
			klog.InfoS("Reject responder connected to OpenFlow")
			start := time.Now()
			r.Serve(ctx, conn)
			_ = conn.Close()
			if ctx.Err() != nil {
				return
			}
			if time.Since(start) > backoff.Max {
				backoff.Reset()
			}
			klog.ErrorS(conn.Err(), "Reject responder lost its OpenFlow connection; reconnecting", "backoff", backoff.Current())
		}
		if !backoff.Wait(ctx) {
			return
		}
	}
}
