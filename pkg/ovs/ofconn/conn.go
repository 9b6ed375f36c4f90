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

	"k8s.io/klog/v2"
)

// Options tune a connection. Zero values take the defaults.
type Options struct {
	// MissSendLen is sent with set-config: how much of a table-miss packet the switch sends.
	// Default MissSendLenNoBuffer (whole packets). It does not affect controller actions,
	// which carry their own max_len.
	MissSendLen uint16
	// EchoInterval is how often the connection sends an echo request. Default 5 s.
	EchoInterval time.Duration
	// EchoTimeout is how long an echo reply may take before the connection is declared dead.
	// Default 3 s.
	EchoTimeout time.Duration
	// HandshakeTimeout bounds the hello/features/set-config exchange. Default 10 s.
	HandshakeTimeout time.Duration
	// WriteTimeout bounds every write. Default 5 s.
	WriteTimeout time.Duration
	// PacketInQueue is how many decoded packet-ins wait for the reader of PacketIns; more are
	// dropped (and counted) so that a slow consumer never stalls the keepalive. Default 256.
	PacketInQueue int
}

func (o Options) withDefaults() Options {
	if o.MissSendLen == 0 {
		o.MissSendLen = MissSendLenNoBuffer
	}
	if o.EchoInterval <= 0 {
		o.EchoInterval = 5 * time.Second
	}
	if o.EchoTimeout <= 0 {
		o.EchoTimeout = 3 * time.Second
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = 10 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 5 * time.Second
	}
	if o.PacketInQueue <= 0 {
		o.PacketInQueue = 256
	}
	return o
}

// Stats counts what a connection received.
type Stats struct {
	// PacketIns were decoded and queued.
	PacketIns uint64
	// Dropped packet-ins found the queue full.
	Dropped uint64
	// Malformed packet-ins could not be decoded.
	Malformed uint64
}

// Conn is an established OpenFlow 1.3 connection to a switch.
type Conn struct {
	nc       net.Conn
	addr     string
	opts     Options
	features Features

	wmu  sync.Mutex // serializes writes
	xid  atomic.Uint32
	pmu  sync.Mutex
	pend map[uint32]chan error // xid -> waiter for an echo or barrier reply

	packetIns chan *PacketIn
	stats     struct{ packetIns, dropped, malformed atomic.Uint64 }

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

// Handshake runs the OpenFlow 1.3 handshake on an open connection (hello, features request,
// set-config, barrier) and starts reading it. name identifies the peer in errors and logs.
func Handshake(ctx context.Context, nc net.Conn, name string, opts Options) (*Conn, error) {
	opts = opts.withDefaults()
	c := &Conn{nc: nc, addr: name, opts: opts, pend: map[uint32]chan error{},
		packetIns: make(chan *PacketIn, opts.PacketInQueue), done: make(chan struct{})}
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
		return nil, fmt.Errorf("openflow handshake with %s: %w", name, err)
	}
	go c.readLoop()
	go c.keepalive()
	return c, nil
}

// handshake runs synchronously, before the read loop starts.
func (c *Conn) handshake() error {
	if _, err := c.nc.Write(EncodeHello(c.nextXid())); err != nil {
		return fmt.Errorf("sending hello: %w", err)
	}
	hello, err := ReadMessage(c.nc)
	if err != nil {
		return fmt.Errorf("reading hello: %w", err)
	}
	if _, err := NegotiateVersion(hello); err != nil {
		return err
	}
	fxid := c.nextXid()
	if _, err := c.nc.Write(EncodeFeaturesRequest(fxid)); err != nil {
		return fmt.Errorf("sending features request: %w", err)
	}
	reply, err := c.awaitSync(TypeFeaturesReply, fxid)
	if err != nil {
		return fmt.Errorf("features request: %w", err)
	}
	if c.features, err = DecodeFeaturesReply(reply); err != nil {
		return err
	}
	bxid := c.nextXid()
	msg := append(EncodeSetConfig(c.nextXid(), c.opts.MissSendLen), EncodeBarrierRequest(bxid)...)
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
			if _, err := c.nc.Write(EncodeEchoReply(h.Xid, msg[headerLen:])); err != nil {
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

func (c *Conn) nextXid() uint32 { return c.xid.Add(1) }

// Features is the switch's features reply from the handshake.
func (c *Conn) Features() Features { return c.features }

// PacketIns delivers decoded packet-ins. It is closed when the connection ends.
func (c *Conn) PacketIns() <-chan *PacketIn { return c.packetIns }

// Done is closed when the connection has ended; Err then says why.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err is why the connection ended, or nil while it is up.
func (c *Conn) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// Stats returns the packet-in counters.
func (c *Conn) Stats() Stats {
	return Stats{PacketIns: c.stats.packetIns.Load(), Dropped: c.stats.dropped.Load(), Malformed: c.stats.malformed.Load()}
}

// Close ends the connection.
func (c *Conn) Close() error {
	c.fail(errors.New("closed"))
	return nil
}

// fail ends the connection with err, once.
func (c *Conn) fail(err error) {
	c.closeOnce.Do(func() {
		c.err = fmt.Errorf("openflow connection to %s: %w", c.addr, err)
		_ = c.nc.Close()
		close(c.done)
	})
}

// write sends one message.
func (c *Conn) write(msg []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.opts.WriteTimeout))
	if _, err := c.nc.Write(msg); err != nil {
		c.fail(fmt.Errorf("write: %w", err))
		return c.err
	}
	return nil
}

// SendPacketOut sends a packet-out. It does not wait: errors from the switch are logged.
func (c *Conn) SendPacketOut(po PacketOut) error {
	msg, err := EncodePacketOut(c.nextXid(), po)
	if err != nil {
		return err
	}
	return c.write(msg)
}

// Barrier waits until the switch has processed every message sent before it.
func (c *Conn) Barrier(ctx context.Context) error {
	return c.request(ctx, func(xid uint32) []byte { return EncodeBarrierRequest(xid) })
}

// Echo sends an echo request and waits for its reply.
func (c *Conn) Echo(ctx context.Context) error {
	return c.request(ctx, func(xid uint32) []byte { return EncodeEchoRequest(xid, []byte("ka")) })
}

// request sends the message built for a fresh xid and waits for the reply (or error) to it.
func (c *Conn) request(ctx context.Context, build func(xid uint32) []byte) error {
	xid := c.nextXid()
	ch := make(chan error, 1)
	c.pmu.Lock()
	c.pend[xid] = ch
	c.pmu.Unlock()
	defer func() {
		c.pmu.Lock()
		delete(c.pend, xid)
		c.pmu.Unlock()
	}()
	if err := c.write(build(xid)); err != nil {
		return err
	}
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-c.done:
		return c.err
	}
}

// answer completes the request waiting for xid, if any.
func (c *Conn) answer(xid uint32, err error) bool {
	c.pmu.Lock()
	ch, ok := c.pend[xid]
	c.pmu.Unlock()
	if ok {
		select {
		case ch <- err:
		default: // a duplicate reply
		}
	}
	return ok
}

func (c *Conn) readLoop() {
	defer close(c.packetIns)
	for {
		msg, err := ReadMessage(c.nc)
		if err != nil {
			c.fail(fmt.Errorf("read: %w", err))
			return
		}
		c.dispatch(msg)
	}
}

func (c *Conn) dispatch(msg []byte) {
	h, _ := ParseHeader(msg)
	switch h.Type {
	case TypeEchoRequest:
		_ = c.write(EncodeEchoReply(h.Xid, msg[headerLen:]))
	case TypeEchoReply, TypeBarrierReply:
		c.answer(h.Xid, nil)
	case TypeError:
		e, err := DecodeError(msg)
		if err != nil {
			klog.ErrorS(err, "Malformed OpenFlow error message", "peer", c.addr)
			return
		}
		if !c.answer(h.Xid, e) {
			klog.ErrorS(e, "OpenFlow switch reported an error", "peer", c.addr, "xid", e.Xid)
		}
	case TypePacketIn:
		pi, err := DecodePacketIn(msg)
		if err != nil {
			c.stats.malformed.Add(1)
			klog.V(2).InfoS("Dropping malformed packet-in", "peer", c.addr, "err", err)
			return
		}
		// Count before queueing, so that a reader who took the packet-in sees it counted. The read
		// loop is the only sender and the queue has room, so the send cannot block.
		if len(c.packetIns) == cap(c.packetIns) {
			c.stats.dropped.Add(1)
			return
		}
		c.stats.packetIns.Add(1)
		c.packetIns <- pi
	}
}

// keepalive sends echo requests and ends the connection when one goes unanswered.
func (c *Conn) keepalive() {
	t := time.NewTicker(c.opts.EchoInterval)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), c.opts.EchoTimeout)
			err := c.Echo(ctx)
			cancel()
			if err != nil {
				c.fail(fmt.Errorf("no echo reply within %v: %w", c.opts.EchoTimeout, err))
				return
			}
		}
	}
}

func ctxDeadlinePassed(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}
