package native

import (
	"fmt"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// msgRef says which op a bundled message was encoded from: part 0 is the op's flow-mod or
// group-mod, part k its k-th insert-bucket continuation (a group too large for one message).
type msgRef struct {
	op   int32
	part int32
}

// bundleEncoder encodes the ops of one Apply as OFPT_BUNDLE_ADD_MESSAGEs with consecutive
// xids, and remembers which op each message came from.
type bundleEncoder struct {
	w        buf
	bundleID uint32
	flags    uint16
	firstXid uint32
	// maxLen bounds one bundle-add message (OpenFlow's 64 KiB less nothing); tests lower it.
	maxLen  int
	refs    []msgRef
	scratch buf
}

func newBundleEncoder(bundleID uint32, flags uint16, firstXid uint32) *bundleEncoder {
	return &bundleEncoder{bundleID: bundleID, flags: flags, firstXid: firstXid, maxLen: maxMessageLen}
}

// nextXid is the xid of the next message.
func (e *bundleEncoder) nextXid() uint32 { return e.firstXid + uint32(len(e.refs)) }

// begin starts a bundle-add message for op i, part part; the caller writes the inner message
// and calls end.
func (e *bundleEncoder) begin(i, part int) (int, uint32) {
	xid := e.nextXid()
	e.refs = append(e.refs, msgRef{op: int32(i), part: int32(part)})
	start := e.w.header(typeBundleAdd, xid)
	e.w.u32(e.bundleID)
	e.w.u16(0)
	e.w.u16(e.flags)
	return start, xid
}

func (e *bundleEncoder) end(start int) { e.w.setLen16(start, 2) }

// op encodes ops[i].
func (e *bundleEncoder) op(i int, op *openflow.Op) error {
	if err := validateOp(op); err != nil {
		return err
	}
	switch op.Kind {
	case openflow.AddGroup, openflow.ModifyGroup:
		return e.group(i, op)
	case openflow.DeleteGroup:
		start, xid := e.begin(i, 0)
		inner := groupModHeader(&e.w, xid, groupDelete, 0, op.Group.ID, bucketAll)
		e.w.setLen16(inner, 2)
		e.end(start)
		return nil
	}
	start, xid := e.begin(i, 0)
	if err := appendFlowMod(&e.w, op, xid); err != nil {
		return err
	}
	e.end(start)
	return nil
}

// group encodes an add or modify of a group, splitting buckets that do not fit in one
// message into insert-bucket messages of the same bundle (applied atomically with it), like
// the ovs-ofctl backend's continuation lines.
func (e *bundleEncoder) group(i int, op *openflow.Op) error {
	g := op.Group
	typ, err := groupTypeCode(g.Type)
	if err != nil {
		return err
	}
	command := groupAdd
	if op.Kind == openflow.ModifyGroup {
		command = groupModify
	}
	e.scratch.b = e.scratch.b[:0]
	if typ == 1 {
		if err := appendSelectionMethod(&e.scratch, g); err != nil {
			return err
		}
	}
	props := append([]byte(nil), e.scratch.b...)
	weighted := typ == 1
	budget := e.maxLen - bundleAddHeaderLen

	start, xid := e.begin(i, 0)
	inner := groupModHeader(&e.w, xid, command, typ, g.ID, bucketAll)
	reserve, part, inMsg := len(props), 0, 0
	for b := range g.Buckets {
		mark := len(e.w.b)
		if err := appendBucket(&e.w, &g.Buckets[b], weighted); err != nil {
			return err
		}
		if len(e.w.b)-inner+reserve <= budget {
			inMsg++
			continue
		}
		if inMsg == 0 {
			return fmt.Errorf("group %d: bucket %d alone exceeds the OpenFlow message limit", g.ID, g.Buckets[b].ID)
		}
		bucket := append(e.scratch.b[:0], e.w.b[mark:]...)
		e.w.b = e.w.b[:mark]
		e.finishGroupMsg(start, inner, props[:len(props)*boolInt(part == 0)])
		part++
		start, xid = e.begin(i, part)
		inner = groupModHeader(&e.w, xid, groupInsertBucket, 0, g.ID, bucketLast)
		e.w.bytes(bucket)
		e.scratch.b = bucket
		reserve, inMsg = 0, 1
		if len(e.w.b)-inner > budget {
			return fmt.Errorf("group %d: bucket %d alone exceeds the OpenFlow message limit", g.ID, g.Buckets[b].ID)
		}
	}
	if part == 0 {
		e.finishGroupMsg(start, inner, props)
	} else {
		e.finishGroupMsg(start, inner, nil)
	}
	return nil
}

// finishGroupMsg sets bucket_array_len, appends the group properties and closes both the group
// mod and its bundle-add message.
func (e *bundleEncoder) finishGroupMsg(start, inner int, props []byte) {
	n := len(e.w.b) - inner - groupModFixedLen
	e.w.b[inner+16], e.w.b[inner+17] = byte(n>>8), byte(n)
	e.w.bytes(props)
	e.w.setLen16(inner, 2)
	e.end(start)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// validateOp checks that op carries what its kind needs, before anything is sent.
func validateOp(op *openflow.Op) error { return op.Check() }
