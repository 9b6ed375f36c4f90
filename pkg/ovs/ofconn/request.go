package ofconn

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
)

// Reply is what a request waiting for one xid receives: a reply message (whole) or the
// switch's error about the request.
type Reply struct {
	Msg []byte
	Err *Error
}

// maxMultipartParts bounds the replies buffered for one multipart request. The agent's
// multipart requests (table and meter statistics) are answered in a few parts; a reply with
// more parts than this fails the request instead of losing parts.
const maxMultipartParts = 1024

// waiter buffers the replies to one xid. lost is set when a reply found the buffer full: for a
// single reply a duplicate, for a multipart request a part that would be missing.
//
// A single-reply waiter buffers in ch (capacity 1). A multipart waiter queues its parts in
// parts, up to max, and signals ready: the healer reads the table statistics every second, and a
// channel with room for max parts allocated 32 KB per request for the one to three parts OVS
// sends (about 1.9 MB a minute of the 4–7 MB an idle agent allocates).
type waiter struct {
	ch   chan Reply
	lost atomic.Bool

	mu    sync.Mutex
	parts []Reply
	max   int
	ready chan struct{}
}

// Expect registers a waiter for the reply to xid (register before sending the request); call
// the returned cancel when done.
func (c *Conn) Expect(xid uint32) (<-chan Reply, func()) {
	w := &waiter{ch: make(chan Reply, 1)}
	return w.ch, c.register(xid, w)
}

// expectParts registers a waiter that queues up to n replies to xid (the parts of a multipart
// reply).
func (c *Conn) expectParts(xid uint32, n int) (*waiter, func()) {
	w := &waiter{max: n, ready: make(chan struct{}, 1)}
	return w, c.register(xid, w)
}

// register makes w the waiter of xid until the returned cancel.
func (c *Conn) register(xid uint32, w *waiter) func() {
	c.pmu.Lock()
	c.pend[xid] = w
	c.pmu.Unlock()
	return func() {
		c.pmu.Lock()
		delete(c.pend, xid)
		c.pmu.Unlock()
	}
}

// put hands r to w without blocking: into its channel, or its queue of parts.
func (w *waiter) put(r Reply) {
	if w.ready == nil {
		select {
		case w.ch <- r:
		default: // a duplicate reply
			w.lost.Store(true)
		}
		return
	}
	w.mu.Lock()
	if len(w.parts) >= w.max {
		w.lost.Store(true) // more parts than queued
	} else {
		w.parts = append(w.parts, r)
	}
	w.mu.Unlock()
	select {
	case w.ready <- struct{}{}:
	default:
	}
}

// nextPart returns the oldest queued part, waiting for one until ctx ends or the connection
// ends (then the error is the connection's).
func (c *Conn) nextPart(ctx context.Context, w *waiter) (Reply, error) {
	for {
		w.mu.Lock()
		if len(w.parts) > 0 {
			r := w.parts[0]
			w.parts[0] = Reply{}
			w.parts = w.parts[1:]
			w.mu.Unlock()
			return r, nil
		}
		w.mu.Unlock()
		select {
		case <-w.ready:
		case <-ctx.Done():
			return Reply{}, ctx.Err()
		case <-c.done:
			return Reply{}, c.err
		}
	}
}

// Await waits for a reply registered with Expect, until ctx ends or the connection ends (then
// the error is the connection's: a reset mid-request fails the waiter).
func (c *Conn) Await(ctx context.Context, ch <-chan Reply) (Reply, error) {
	select {
	case r := <-ch:
		return r, nil
	case <-ctx.Done():
		return Reply{}, ctx.Err()
	case <-c.done:
		return Reply{}, c.err
	}
}

// Request sends msg, whose xid is xid, and waits for its reply (see Await).
func (c *Conn) Request(ctx context.Context, xid uint32, msg []byte) (Reply, error) {
	ch, cancel := c.Expect(xid)
	defer cancel()
	if err := c.Write(ctx, msg); err != nil {
		return Reply{}, err
	}
	return c.Await(ctx, ch)
}

// Multipart sends the multipart request req, whose xid is xid, and passes each part of the
// reply to each, in order, until a part without OFPMPF_REPLY_MORE or until each says stop. The
// switch's error about the request is returned as an *Error.
func (c *Conn) Multipart(ctx context.Context, xid uint32, req []byte, each func(part []byte) (stop bool, err error)) error {
	w, cancel := c.expectParts(xid, maxMultipartParts)
	defer cancel()
	if err := c.Write(ctx, req); err != nil {
		return err
	}
	for {
		r, err := c.nextPart(ctx, w)
		if err != nil {
			return err
		}
		if w.lost.Load() {
			return fmt.Errorf("multipart reply to xid %d: more than %d parts waiting, parts were dropped", xid, maxMultipartParts)
		}
		if r.Err != nil {
			return r.Err
		}
		stop, err := each(r.Msg)
		if err != nil || stop {
			return err
		}
		if len(r.Msg) < headerLen+4 || binary.BigEndian.Uint16(r.Msg[headerLen+2:])&MultipartReplyMore == 0 {
			return nil
		}
	}
}

// Barrier waits until the switch has processed every message sent before it.
func (c *Conn) Barrier(ctx context.Context) error {
	xid := c.NextXid()
	return replyErr(c.Request(ctx, xid, encodeV(c.opts.Version, TypeBarrierRequest, xid, nil)))
}

// Echo sends an echo request and waits for its reply.
func (c *Conn) Echo(ctx context.Context) error {
	xid := c.NextXid()
	return replyErr(c.Request(ctx, xid, encodeV(c.opts.Version, TypeEchoRequest, xid, []byte("ka"))))
}

func replyErr(r Reply, err error) error {
	if err != nil {
		return err
	}
	if r.Err != nil {
		return r.Err
	}
	return nil
}

// ErrorRange collects the switch's errors about the requests of xids [First, Last] that no
// Expect waits for (the messages of a bundle).
type ErrorRange struct {
	First, Last uint32
	mu          sync.Mutex
	errs        []*Error
}

// CollectErrors starts collecting the errors about xids [first, last]; stop ends it. One range
// is collected at a time: a second call replaces the first.
func (c *Conn) CollectErrors(first, last uint32) (r *ErrorRange, stop func()) {
	r = &ErrorRange{First: first, Last: last}
	c.ranges.Store(r)
	return r, func() { c.ranges.CompareAndSwap(r, nil) }
}

func (r *ErrorRange) add(e *Error) bool {
	if e.Xid < r.First || e.Xid > r.Last {
		return false
	}
	r.mu.Lock()
	r.errs = append(r.errs, e)
	r.mu.Unlock()
	return true
}

// List returns the errors collected so far, in the order received.
func (r *ErrorRange) List() []*Error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*Error(nil), r.errs...)
}

// Hold keeps the connection up through missed echo replies until release is called: while
// the switch works through a large request (a bundle) it may answer late, and that request's
// own deadline covers the time.
func (c *Conn) Hold() (release func()) {
	c.holds.Add(1)
	var once sync.Once
	return func() { once.Do(func() { c.holds.Add(-1) }) }
}

// deliver hands r to the waiter of xid, if any.
func (c *Conn) deliver(xid uint32, r Reply) bool {
	c.pmu.Lock()
	w, ok := c.pend[xid]
	c.pmu.Unlock()
	if ok {
		w.put(r)
	}
	return ok
}

func (c *Conn) readLoop() {
	defer close(c.packetIns)
	for {
		msg, err := ReadMessage(c.nc)
		if err != nil {
			c.CloseWithError(fmt.Errorf("read: %w", err))
			return
		}
		c.lastRecv.Store(time.Now().UnixNano())
		c.dispatch(msg)
	}
}

func (c *Conn) dispatch(msg []byte) {
	h, _ := ParseHeader(msg)
	switch h.Type {
	case TypeEchoRequest:
		// Never block the reader on the write lock: a large request may hold it while the
		// switch waits for its replies to be read.
		go func() { _ = c.Write(context.Background(), echoReply(msg)) }()
	case TypeError:
		c.dispatchError(msg)
	case TypePacketIn:
		c.queuePacketIn(msg)
	case TypeFlowRemoved, TypePortStatus, TypeRoleStatus, TypeTableStatus, TypeRequestForward:
		// Asynchronous messages reach every connection to the management socket: ignored.
	default:
		if !c.deliver(h.Xid, Reply{Msg: msg}) && h.Type == TypeMultipartReply {
			c.handleUnsolicited(msg)
		}
	}
}

// HandleUnsolicited makes fn receive every multipart reply no request waits for (the updates
// of an OpenFlow flow monitor, which the switch sends with xid 0), until the returned cancel.
// fn runs on the read loop: it must not block. One handler at a time: a second call replaces
// the first.
func (c *Conn) HandleUnsolicited(fn func(msg []byte)) (cancel func()) {
	p := &fn
	c.unsolicited.Store(p)
	return func() { c.unsolicited.CompareAndSwap(p, nil) }
}

func (c *Conn) handleUnsolicited(msg []byte) {
	if fn := c.unsolicited.Load(); fn != nil {
		(*fn)(msg)
	}
}

func (c *Conn) dispatchError(msg []byte) {
	e, err := DecodeError(msg)
	if err != nil {
		klog.ErrorS(err, "Malformed OpenFlow error message", "peer", c.addr)
		return
	}
	if c.deliver(e.Xid, Reply{Err: e}) {
		return
	}
	if r := c.ranges.Load(); r != nil && r.add(e) {
		return
	}
	klog.ErrorS(e, "OpenFlow switch reported an error", "peer", c.addr, "xid", e.Xid)
}

func (c *Conn) queuePacketIn(msg []byte) {
	if c.opts.IgnorePacketIns {
		return
	}
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

// keepalive ends the connection when an echo request, sent after the connection has been quiet
// for EchoInterval, goes unanswered within EchoTimeout while no Hold is in force.
func (c *Conn) keepalive() {
	t := time.NewTicker(c.opts.EchoInterval)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
		}
		if c.holds.Load() > 0 || time.Since(time.Unix(0, c.lastRecv.Load())) < c.opts.EchoInterval {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.opts.EchoTimeout)
		err := c.Echo(ctx)
		cancel()
		if err != nil && c.holds.Load() == 0 {
			c.CloseWithError(fmt.Errorf("no echo reply within %v: %w", c.opts.EchoTimeout, err))
			return
		}
		if err == nil {
			c.stats.keepalives.Add(1)
		}
	}
}
