package native

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/ofconn"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// Apply executes ops as one atomic, ordered bundle, as ovs-ofctl does: open, the flow and
// group mods, a barrier; if the switch refused none of them, commit, otherwise discard. When
// the switch refuses an op the error is a *RejectedOpError naming it and nothing changed. When
// the connection fails or ctx ends during the commit, whether the bundle took effect is
// unknown (the connection is closed, which discards an uncommitted bundle).
func (b *Bridge) Apply(ctx context.Context, ops []openflow.Op) error {
	if len(ops) == 0 {
		return nil
	}
	for i := range ops {
		if err := validateOp(&ops[i]); err != nil {
			return fmt.Errorf("openflow bundle %s: op %d: %w", b.target, i, err)
		}
	}
	b.applyMu.Lock()
	defer b.applyMu.Unlock()
	caller := ctx
	ctx, cancel := context.WithTimeout(ctx, b.opts.applyBase+time.Duration(len(ops))*b.opts.applyPerOp)
	defer cancel()
	c, err := b.connection(ctx)
	if err != nil {
		return fmt.Errorf("openflow bundle %s: %w", b.target, err)
	}
	defer c.Hold()()
	start := time.Now()
	b.mu.Lock()
	b.bundleID++
	id := b.bundleID
	b.mu.Unlock()
	err = b.transact(ctx, c, id, ops)
	var (
		rej *RejectedOpError
		swe *ofconn.Error
	)
	switch {
	case err == nil:
		klog.V(4).InfoS("Applied OpenFlow bundle", "target", b.target, "ops", len(ops), "duration", time.Since(start))
		return nil
	case errors.As(err, &rej):
		return err
	case errors.Is(err, errEncoding), errors.As(err, &swe):
		// The switch answered (or nothing was sent): the connection is in a known state.
		return fmt.Errorf("openflow bundle %s: %w", b.target, err)
	case caller.Err() != nil:
		// The caller gave up: the bundle's state on the switch is unknown, so drop the
		// connection (which discards it unless it was committed), but the switch lost nothing.
		b.mon.CloseQuietly(c, err)
		return fmt.Errorf("openflow bundle %s: %w", b.target, err)
	default:
		// The connection failed or the switch did not answer within the deadline: as for a
		// lost connection, the next one is a reset.
		c.CloseWithError(err)
		return fmt.Errorf("openflow bundle %s: %w", b.target, err)
	}
}

// errEncoding marks an op the encoder refused: nothing was committed.
var errEncoding = errors.New("cannot encode op")

// maxMessages bounds how many messages ops encode to (a group splits at most once per bucket).
func maxMessages(ops []openflow.Op) int {
	n := 0
	for i := range ops {
		if g := ops[i].Group; g != nil && len(g.Buckets) > 1 {
			n += len(g.Buckets)
		} else {
			n++
		}
	}
	return n
}

// transact runs one bundle on c.
func (b *Bridge) transact(ctx context.Context, c *ofconn.Conn, id uint32, ops []openflow.Op) error {
	bound := maxMessages(ops)
	first := c.ReserveXids(bound + 3)
	openXid, barrierXid, endXid := first, first+uint32(bound)+1, first+uint32(bound)+2
	txn, stopCollecting := c.CollectErrors(first+1, first+uint32(bound))
	defer stopCollecting()
	openCh, cancelOpen := c.Expect(openXid)
	defer cancelOpen()
	barrierCh, cancelBarrier := c.Expect(barrierXid)
	defer cancelBarrier()

	flags := bundleAtomic | bundleOrdered
	e := newBundleEncoder(id, flags, first+1)
	e.maxLen = b.opts.maxMessageLen
	putBundleControl(&e.w, openXid, id, bundleOpenRequest, flags)
	for i := range ops {
		if err := e.op(i, &ops[i]); err != nil {
			// Nothing was committed; discard what the switch has of the bundle.
			b.discard(ctx, c, endXid, id, flags)
			return fmt.Errorf("%w: op %d (%s): %v", errEncoding, i, ops[i].Kind, err)
		}
		if len(e.w.b) >= flushBytes {
			if err := c.Write(ctx, e.w.b); err != nil {
				return err
			}
			e.w.b = e.w.b[:0]
		}
	}
	e.w.setLen16(e.w.header(typeBarrierRequest, barrierXid), 2)
	if err := c.Write(ctx, e.w.b); err != nil {
		return err
	}
	r, err := c.Await(ctx, openCh)
	if err != nil {
		return fmt.Errorf("opening bundle: %w", err)
	}
	if r.Err != nil {
		return fmt.Errorf("opening bundle: %w", r.Err)
	}
	if _, err := c.Await(ctx, barrierCh); err != nil {
		return fmt.Errorf("waiting for the barrier after %d messages: %w", len(e.refs), err)
	}
	if errs := txn.List(); len(errs) > 0 {
		b.discard(ctx, c, endXid, id, flags)
		return b.rejected(ops, e.refs, txn.First, errs[0])
	}
	var w buf
	putBundleControl(&w, endXid, id, bundleCommitRequest, flags)
	r, err = c.Request(ctx, endXid, w.b)
	if err != nil {
		return fmt.Errorf("committing bundle: %w", err)
	}
	if r.Err != nil {
		if errs := txn.List(); len(errs) > 0 {
			return b.rejected(ops, e.refs, txn.First, errs[0])
		}
		return fmt.Errorf("committing bundle: %w", r.Err)
	}
	if len(r.Msg) < headerLen+6 {
		return fmt.Errorf("committing bundle: bundle control reply of %d bytes", len(r.Msg))
	}
	if typ := binary.BigEndian.Uint16(r.Msg[headerLen+4:]); typ != bundleCommitReply {
		return fmt.Errorf("committing bundle: unexpected bundle control reply type %d", typ)
	}
	return nil
}

// discard discards bundle id (best effort: the bundle is also dropped with the connection).
func (b *Bridge) discard(ctx context.Context, c *ofconn.Conn, xid, id uint32, flags uint16) {
	var w buf
	putBundleControl(&w, xid, id, bundleDiscardRequest, flags)
	if _, err := c.Request(ctx, xid, w.b); err != nil {
		klog.V(2).InfoS("Discarding a refused OpenFlow bundle failed", "target", b.target, "err", err)
	}
}

// rejected turns the switch's first error about a bundled message into the error naming its op.
func (b *Bridge) rejected(ops []openflow.Op, refs []msgRef, firstXid uint32, e *ofconn.Error) error {
	k := int(e.Xid - firstXid)
	if k < 0 || k >= len(refs) {
		return fmt.Errorf("openflow bundle %s: the switch refused a message: %w", b.target, e)
	}
	ref := refs[k]
	op := &ops[ref.op]
	return &RejectedOpError{Target: b.target, Index: int(ref.op), Kind: op.Kind, Part: int(ref.part),
		Text: opText(op), Reason: e.Error(), Err: e}
}

func putBundleControl(w *buf, xid, id uint32, typ, flags uint16) {
	start := w.header(typeBundleControl, xid)
	w.u32(id)
	w.u16(typ)
	w.u16(flags)
	w.setLen16(start, 2)
}
