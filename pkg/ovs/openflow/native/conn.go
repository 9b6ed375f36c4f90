package native

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/ofconn"
)

// reply is what a request waiting for one xid receives: the reply message or the switch's
// error.
type reply struct {
	msg []byte
	err *SwitchError
}

// txnErrors collects the switch's errors about the messages of the bundle in flight (xids in
// [first, last]).
type txnErrors struct {
	first, last uint32
	mu          sync.Mutex
	errs        []*SwitchError
}

func (t *txnErrors) add(e *SwitchError) bool {
	if e.Xid < t.first || e.Xid > t.last {
		return false
	}
	t.mu.Lock()
	t.errs = append(t.errs, e)
	t.mu.Unlock()
	return true
}

func (t *txnErrors) list() []*SwitchError {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]*SwitchError(nil), t.errs...)
}

// conn is one OpenFlow 1.5 connection to a switch: a reader goroutine dispatches replies by
// xid, answers echo requests and discards packet-ins; a keepalive goroutine sends echo
// requests when the connection has been quiet.
type conn struct {
	nc   net.Conn
	name string
	dpid uint64
	opts connOptions

	wmu sync.Mutex // serializes writes
	xid atomic.Uint32

	pmu  sync.Mutex
	pend map[uint32]chan reply
	txn  atomic.Pointer[txnErrors]

	lastRecv atomic.Int64 // unix nanos of the last message received
	busy     atomic.Int32 // Applies in flight: the keepalive then waits

	closeOnce sync.Once
	done      chan struct{}
	err       error
}

type connOptions struct {
	echoInterval, echoTimeout, writeTimeout time.Duration
}

// dial connects to addr ("unix:<path>" or "tcp:<host>:<port>") and runs the OpenFlow 1.5
// handshake (hello, features) within ctx.
func dial(ctx context.Context, addr string, opts connOptions) (*conn, error) {
	network, address, ok := strings.Cut(addr, ":")
	if !ok || (network != "unix" && network != "tcp") || address == "" {
		return nil, fmt.Errorf("openflow endpoint %q: want unix:<path> or tcp:<host>:<port>", addr)
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, network, address)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", addr, err)
	}
	c := &conn{nc: nc, name: addr, opts: opts, pend: map[uint32]chan reply{}, done: make(chan struct{})}
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	err = c.handshake()
	stop()
	_ = nc.SetDeadline(time.Time{})
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		_ = nc.Close()
		return nil, fmt.Errorf("openflow 1.5 handshake with %s: %w", addr, err)
	}
	c.lastRecv.Store(time.Now().UnixNano())
	go c.readLoop()
	go c.keepalive()
	return c, nil
}

func (c *conn) handshake() error {
	var w buf
	start := w.header(typeHello, c.nextXid())
	w.u16(1) // version bitmap element
	w.u16(8)
	w.u32(1 << ofVersion)
	w.setLen16(start, 2)
	fxid := c.nextXid()
	w.setLen16(w.header(typeFeaturesRequest, fxid), 2)
	if _, err := c.nc.Write(w.b); err != nil {
		return fmt.Errorf("sending hello: %w", err)
	}
	hello, err := ofconn.ReadMessage(c.nc)
	if err != nil {
		return fmt.Errorf("reading hello: %w", err)
	}
	if err := checkHello(hello); err != nil {
		return err
	}
	for {
		msg, err := ofconn.ReadMessage(c.nc)
		if err != nil {
			return fmt.Errorf("reading features reply: %w", err)
		}
		xid := binary.BigEndian.Uint32(msg[4:])
		switch msg[1] {
		case typeEchoRequest:
			if _, err := c.nc.Write(echoReply(msg)); err != nil {
				return err
			}
		case typeError:
			return decodeError(msg)
		case typeFeaturesReply:
			if xid != fxid || len(msg) < headerLen+8 {
				continue
			}
			c.dpid = binary.BigEndian.Uint64(msg[headerLen:])
			return nil
		}
	}
}

// checkHello accepts a peer hello that offers OpenFlow 1.5.
func checkHello(msg []byte) error {
	if msg[1] != typeHello {
		return fmt.Errorf("expected hello, got message type %d", msg[1])
	}
	elems := msg[headerLen:]
	for len(elems) >= 4 {
		et, el := binary.BigEndian.Uint16(elems), int(binary.BigEndian.Uint16(elems[2:]))
		if el < 4 || el > len(elems) {
			break
		}
		if et == 1 && el >= 8 {
			if binary.BigEndian.Uint32(elems[4:])&(1<<ofVersion) == 0 {
				return errors.New("the switch does not offer OpenFlow 1.5 (enable it in the bridge's protocols)")
			}
			return nil
		}
		el = (el + 7) / 8 * 8
		if el > len(elems) {
			break
		}
		elems = elems[el:]
	}
	if msg[0] < ofVersion {
		return fmt.Errorf("the switch speaks OpenFlow version 0x%02x at most, need 0x%02x (1.5)", msg[0], ofVersion)
	}
	return nil
}

func echoReply(req []byte) []byte {
	m := append([]byte(nil), req...)
	m[1] = typeEchoReply
	return m
}

func (c *conn) nextXid() uint32 { return c.xid.Add(1) }

// reserveXids returns the first of n consecutive xids.
func (c *conn) reserveXids(n int) uint32 { return c.xid.Add(uint32(n)) - uint32(n) + 1 }

func (c *conn) fail(err error) {
	c.closeOnce.Do(func() {
		c.err = fmt.Errorf("openflow connection to %s: %w", c.name, err)
		_ = c.nc.Close()
		close(c.done)
	})
}

func (c *conn) alive() bool {
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// write sends p whole; a failed or timed-out write ends the connection (a partial message
// cannot be taken back). ctx may shorten the deadline.
func (c *conn) write(ctx context.Context, p []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	dl := time.Now().Add(c.opts.writeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	_ = c.nc.SetWriteDeadline(dl)
	stop := context.AfterFunc(ctx, func() { _ = c.nc.SetWriteDeadline(time.Unix(1, 0)) })
	_, err := c.nc.Write(p)
	stop()
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		c.fail(fmt.Errorf("write: %w", err))
		return c.err
	}
	return nil
}

// expect registers a waiter for the reply to xid; call the returned cancel when done.
func (c *conn) expect(xid uint32) (<-chan reply, func()) { return c.expectN(xid, 1) }

// expectParts is expect for a multipart request, whose reply may span several messages with
// the same xid: up to maxMultipartParts are buffered.
func (c *conn) expectParts(xid uint32) (<-chan reply, func()) {
	return c.expectN(xid, maxMultipartParts)
}

// expectN registers a waiter that buffers up to n replies to xid.
func (c *conn) expectN(xid uint32, n int) (<-chan reply, func()) {
	ch := make(chan reply, n)
	c.pmu.Lock()
	c.pend[xid] = ch
	c.pmu.Unlock()
	return ch, func() {
		c.pmu.Lock()
		delete(c.pend, xid)
		c.pmu.Unlock()
	}
}

// await waits for a registered reply, ctx or the connection's end.
func (c *conn) await(ctx context.Context, ch <-chan reply) (reply, error) {
	select {
	case r := <-ch:
		return r, nil
	case <-ctx.Done():
		return reply{}, ctx.Err()
	case <-c.done:
		return reply{}, c.err
	}
}

func (c *conn) deliver(xid uint32, r reply) bool {
	c.pmu.Lock()
	ch, ok := c.pend[xid]
	c.pmu.Unlock()
	if ok {
		select {
		case ch <- r:
		default:
		}
	}
	return ok
}

func (c *conn) readLoop() {
	for {
		msg, err := ofconn.ReadMessage(c.nc)
		if err != nil {
			c.fail(fmt.Errorf("read: %w", err))
			return
		}
		c.lastRecv.Store(time.Now().UnixNano())
		xid := binary.BigEndian.Uint32(msg[4:])
		switch msg[1] {
		case typeEchoRequest:
			go func() { _ = c.write(context.Background(), echoReply(msg)) }()
		case typeError:
			e := decodeError(msg)
			if c.deliver(xid, reply{err: e}) {
				continue
			}
			if t := c.txn.Load(); t != nil && t.add(e) {
				continue
			}
			klog.ErrorS(e, "OpenFlow switch reported an error", "peer", c.name)
		case typeEchoReply, typeBarrierReply, typeBundleControl, typeFeaturesReply, typeMultipartReply:
			c.deliver(xid, reply{msg: msg})
		default:
			// Packet-ins of controller actions, port status and other asynchronous messages
			// reach every connection to the management socket: this one ignores them.
		}
	}
}

// request sends msg (whose xid is xid) and waits for its reply.
func (c *conn) request(ctx context.Context, xid uint32, msg []byte) (reply, error) {
	ch, cancel := c.expect(xid)
	defer cancel()
	if err := c.write(ctx, msg); err != nil {
		return reply{}, err
	}
	return c.await(ctx, ch)
}

// keepalive ends the connection when an echo request sent after a quiet interval goes
// unanswered. While an Apply is in flight the switch may take long to answer behind a big
// bundle; the Apply's own deadline covers that time.
func (c *conn) keepalive() {
	t := time.NewTicker(c.opts.echoInterval)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
		}
		if c.busy.Load() > 0 || time.Since(time.Unix(0, c.lastRecv.Load())) < c.opts.echoInterval {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.opts.echoTimeout)
		var w buf
		xid := c.nextXid()
		start := w.header(typeEchoRequest, xid)
		w.bytes([]byte("ka"))
		w.setLen16(start, 2)
		_, err := c.request(ctx, xid, w.b)
		cancel()
		if err != nil && c.busy.Load() == 0 {
			c.fail(fmt.Errorf("no echo reply within %v: %w", c.opts.echoTimeout, err))
			return
		}
	}
}

func (c *conn) close() { c.fail(errors.New("closed")) }
