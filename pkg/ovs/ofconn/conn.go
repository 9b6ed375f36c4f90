package ofconn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Stats counts what a connection received.
type Stats struct {
	// PacketIns were decoded and queued.
	PacketIns uint64
	// Dropped packet-ins found the queue full.
	Dropped uint64
	// Malformed packet-ins could not be decoded.
	Malformed uint64
	// Keepalives are the keepalive's echo requests the switch answered.
	Keepalives uint64
}

// Conn is an established OpenFlow connection to a switch, of one version (Options.Version). A
// read loop routes replies to their requests by xid, answers echo requests and queues
// packet-ins; a keepalive sends echo requests when the connection has been quiet. Any
// goroutine may send requests.
type Conn struct {
	nc       net.Conn
	addr     string
	opts     Options
	features Features

	wmu sync.Mutex // serializes writes
	xid atomic.Uint32

	pmu    sync.Mutex
	pend   map[uint32]*waiter // xid -> waiter of its replies
	ranges atomic.Pointer[ErrorRange]
	// unsolicited handles multipart replies no request waits for (HandleUnsolicited).
	unsolicited atomic.Pointer[func(msg []byte)]

	lastRecv atomic.Int64 // unix nanos of the last message received
	holds    atomic.Int32 // Holds in force: a missed echo then does not end the connection

	packetIns chan *PacketIn
	stats     struct{ packetIns, dropped, malformed, keepalives atomic.Uint64 }

	closeOnce sync.Once
	done      chan struct{}
	err       error // why the connection ended; read after done is closed
}

// Dial connects to an OpenFlow endpoint, "unix:<path>" (e.g. a bridge's management socket
// unix:/var/run/openvswitch/br-int.mgmt) or "tcp:<host>:<port>", and performs the handshake.
// ctx bounds connecting and the handshake only; the connection lasts until Close or failure.
func Dial(ctx context.Context, addr string, opts Options) (*Conn, error) {
	network, address, ok := strings.Cut(addr, ":")
	if !ok || (network != "unix" && network != "tcp") || address == "" {
		return nil, fmt.Errorf("openflow endpoint %q: want unix:<path> or tcp:<host>:<port>", addr)
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, network, address)
	if err != nil {
		return nil, fmt.Errorf("connecting to openflow endpoint %s: %w", addr, err)
	}
	c, err := Handshake(ctx, nc, addr, opts)
	if err != nil {
		_ = nc.Close()
		return nil, err
	}
	return c, nil
}

// Handshake runs the OpenFlow handshake on an open connection (hello, features request and,
// unless packet-ins are ignored, set-config and a barrier) and starts reading it. name
// identifies the peer in errors and logs.
func Handshake(ctx context.Context, nc net.Conn, name string, opts Options) (*Conn, error) {
	opts = opts.Defaults()
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("openflow connection options: %w", err)
	}
	c := &Conn{nc: nc, addr: name, opts: opts, pend: map[uint32]*waiter{}, done: make(chan struct{})}
	if !opts.IgnorePacketIns {
		c.packetIns = make(chan *PacketIn, opts.PacketInQueue)
	} else {
		c.packetIns = make(chan *PacketIn)
	}
	deadline := time.Now().Add(opts.HandshakeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = nc.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	err := c.handshake()
	if !stop() && err == nil {
		// ctx ended as the handshake finished: the deadline may already be in the past.
		err = errors.New("handshake interrupted")
	}
	_ = nc.SetDeadline(time.Time{})
	if err != nil {
		switch {
		case ctx.Err() != nil:
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		case ctxDeadlinePassed(ctx):
			// The socket deadline, set from ctx's, fired a moment before ctx noticed.
			err = fmt.Errorf("%w (%v)", context.DeadlineExceeded, err)
		}
		return nil, fmt.Errorf("openflow %s handshake with %s: %w", versionName(opts.Version), name, err)
	}
	c.lastRecv.Store(time.Now().UnixNano())
	go c.readLoop()
	go c.keepalive()
	return c, nil
}

// handshake runs synchronously, before the read loop starts.
func (c *Conn) handshake() error {
	v := c.opts.Version
	if _, err := c.nc.Write(EncodeHello(v, c.NextXid())); err != nil {
		return fmt.Errorf("sending hello: %w", err)
	}
	hello, err := ReadMessage(c.nc)
	if err != nil {
		return fmt.Errorf("reading hello: %w", err)
	}
	if _, err := NegotiateVersion(hello, v); err != nil {
		return err
	}
	fxid := c.NextXid()
	if _, err := c.nc.Write(EncodeFeaturesRequest(v, fxid)); err != nil {
		return fmt.Errorf("sending features request: %w", err)
	}
	reply, err := c.awaitSync(TypeFeaturesReply, fxid)
	if err != nil {
		return fmt.Errorf("features request: %w", err)
	}
	if c.features, err = DecodeFeaturesReply(reply); err != nil {
		return err
	}
	if c.opts.IgnorePacketIns {
		return nil
	}
	bxid := c.NextXid()
	msg := append(encodeSetConfig(v, c.NextXid(), c.opts.MissSendLen), encodeV(v, TypeBarrierRequest, bxid, nil)...)
	if _, err := c.nc.Write(msg); err != nil {
		return fmt.Errorf("sending set-config: %w", err)
	}
	if _, err := c.awaitSync(TypeBarrierReply, bxid); err != nil {
		return fmt.Errorf("set-config: %w", err)
	}
	return nil
}

// awaitSync reads until the reply of type t to xid, answering echo requests, failing on an
// error message and skipping anything else.
func (c *Conn) awaitSync(t uint8, xid uint32) ([]byte, error) {
	for {
		msg, err := ReadMessage(c.nc)
		if err != nil {
			return nil, err
		}
		h, _ := ParseHeader(msg)
		switch {
		case h.Type == TypeEchoRequest:
			if _, err := c.nc.Write(echoReply(msg)); err != nil {
				return nil, err
			}
		case h.Type == TypeError:
			if e, derr := DecodeError(msg); derr == nil {
				return nil, e
			}
			return nil, errors.New("malformed error message")
		case h.Type == t && h.Xid == xid:
			return msg, nil
		}
	}
}

// ReadMessage reads one whole OpenFlow message (header and body) of any version from r.
func ReadMessage(r io.Reader) ([]byte, error) {
	var hdr [headerLen]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	h, err := ParseHeader(hdr[:])
	if err != nil {
		return nil, err
	}
	msg := make([]byte, h.Length)
	copy(msg, hdr[:])
	if _, err := io.ReadFull(r, msg[headerLen:]); err != nil {
		return nil, fmt.Errorf("reading %d-byte message type %d: %w", h.Length, h.Type, err)
	}
	return msg, nil
}

// NextXid returns a fresh transaction ID.
func (c *Conn) NextXid() uint32 { return c.xid.Add(1) }

// ReserveXids returns the first of n consecutive fresh transaction IDs.
func (c *Conn) ReserveXids(n int) uint32 { return c.xid.Add(uint32(n)) - uint32(n) + 1 }

// Version is the OpenFlow version the connection speaks.
func (c *Conn) Version() uint8 { return c.opts.Version }

// Features is the switch's features reply from the handshake.
func (c *Conn) Features() Features { return c.features }

// PacketIns delivers decoded packet-ins. It is closed when the connection ends.
func (c *Conn) PacketIns() <-chan *PacketIn { return c.packetIns }

// Done is closed when the connection has ended; Err then says why.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Alive reports whether the connection has not ended.
func (c *Conn) Alive() bool {
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// Err is why the connection ended, or nil while it is up.
func (c *Conn) Err() error {
	if c.Alive() {
		return nil
	}
	return c.err
}

// Stats returns the packet-in and keepalive counters.
func (c *Conn) Stats() Stats {
	return Stats{PacketIns: c.stats.packetIns.Load(), Dropped: c.stats.dropped.Load(), Malformed: c.stats.malformed.Load(),
		Keepalives: c.stats.keepalives.Load()}
}

// Close ends the connection.
func (c *Conn) Close() error {
	c.CloseWithError(errors.New("closed"))
	return nil
}

// CloseWithError ends the connection, once, with err as the reason Err reports: every waiting
// request then fails with it.
func (c *Conn) CloseWithError(err error) {
	c.closeOnce.Do(func() {
		c.err = fmt.Errorf("openflow connection to %s: %w", c.addr, err)
		_ = c.nc.Close()
		close(c.done)
	})
}

// Write sends msg whole; a failed or timed-out write ends the connection (a partial message
// cannot be taken back). ctx may shorten Options.WriteTimeout.
func (c *Conn) Write(ctx context.Context, msg []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	dl := time.Now().Add(c.opts.WriteTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	_ = c.nc.SetWriteDeadline(dl)
	stop := context.AfterFunc(ctx, func() { _ = c.nc.SetWriteDeadline(time.Unix(1, 0)) })
	_, err := c.nc.Write(msg)
	stop()
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		c.CloseWithError(fmt.Errorf("write: %w", err))
		return c.err
	}
	return nil
}

// SendPacketOut sends a packet-out on an OpenFlow 1.3 connection. It does not wait: errors from
// the switch are logged.
func (c *Conn) SendPacketOut(po PacketOut) error {
	if c.opts.Version != Version13 {
		return fmt.Errorf("packet-out: encoded for OpenFlow 1.3, the connection speaks %s", versionName(c.opts.Version))
	}
	msg, err := EncodePacketOut(c.NextXid(), po)
	if err != nil {
		return err
	}
	return c.Write(context.Background(), msg)
}

func ctxDeadlinePassed(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}
