package native

import (
	"fmt"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// Flow-mod commands (ofp_flow_mod_command) and group-mod commands (OpenFlow 1.5).
const (
	flowAdd          uint8 = 0
	flowModifyStrict uint8 = 2
	flowDelete       uint8 = 3
	flowDeleteStrict uint8 = 4

	groupAdd          uint16 = 0
	groupModify       uint16 = 1
	groupDelete       uint16 = 2
	groupInsertBucket uint16 = 3

	bucketAll  uint32 = 0xffffffff
	bucketLast uint32 = 0xfffffffe

	defaultPriority uint16 = 0x8000
)

// Fixed lengths of the messages' parts.
const (
	flowModFixedLen    = 48 // header and fixed fields before the match
	groupModFixedLen   = 24
	bundleAddHeaderLen = 16
)

// appendFlowMod writes op (a flow op) as one OpenFlow 1.5 flow-mod with the given xid, exactly
// as ovs-ofctl encodes the line ofctl's bundle writer renders for it.
func appendFlowMod(w *buf, op *openflow.Op, xid uint32) error {
	f := op.Flow
	start := w.header(typeFlowMod, xid)
	var (
		cookie, cookieMask uint64
		table              = f.Table
		command            uint8
		idle, hard         uint16
		priority           = f.Priority
	)
	switch op.Kind {
	case openflow.AddFlow:
		cookie, command, idle, hard = f.Cookie, flowAdd, f.IdleTimeout, f.HardTimeout
	case openflow.ModifyFlowStrict:
		// ovs-ofctl sends a modify's cookie=0x... as the new cookie, which OpenFlow 1.1+ flow
		// mods cannot carry: the field stays zero.
		command, idle, hard = flowModifyStrict, f.IdleTimeout, f.HardTimeout
	case openflow.DeleteFlowStrict:
		command = flowDeleteStrict
	case openflow.DeleteFlows:
		command, priority = flowDelete, defaultPriority
		cookie, cookieMask = f.Cookie, f.CookieMask
		if cookieMask == 0 {
			cookieMask = ^uint64(0)
		}
		if !op.TableSet {
			table = tableAll
		}
	default:
		return fmt.Errorf("%s is not a flow op", op.Kind)
	}
	w.u64(cookie & maskOrAll(cookieMask, op.Kind))
	w.u64(cookieMask)
	w.u8(table)
	w.u8(command)
	w.u16(idle)
	w.u16(hard)
	w.u16(priority)
	w.u32(noBuffer)
	w.u32(portAny)
	w.u32(groupAny)
	w.u16(0) // flags
	w.u16(0) // importance
	if op.Kind == openflow.DeleteFlows {
		w.u16(1)
		w.u16(4)
		w.u32(0)
	} else {
		if err := appendMatch(w, &f.Match); err != nil {
			return fmt.Errorf("match: %w", err)
		}
		if op.Kind != openflow.DeleteFlowStrict {
			if err := appendInstructions(w, f.Actions); err != nil {
				return fmt.Errorf("actions: %w", err)
			}
		}
	}
	return finishMessage(w, start)
}

// maskOrAll is the mask applied to the cookie field: OVS sends a delete's cookie masked.
func maskOrAll(mask uint64, k openflow.OpKind) uint64 {
	if k == openflow.DeleteFlows {
		return mask
	}
	return ^uint64(0)
}

// finishMessage sets the length of the message at start, or fails when it exceeds OpenFlow's
// limit (less the bundle-add header it will travel in).
func finishMessage(w *buf, start int) error {
	n := len(w.b) - start
	if n > maxMessageLen-bundleAddHeaderLen {
		return &tooLongError{n: n}
	}
	w.setLen16(start, 2)
	return nil
}

// tooLongError is an op that does not fit in one OpenFlow message.
type tooLongError struct{ n int }

func (e *tooLongError) Error() string {
	return fmt.Sprintf("%d bytes exceed the OpenFlow message limit", e.n)
}

// groupTypeCode is the OpenFlow group type of a model group type.
func groupTypeCode(t openflow.GroupType) (uint8, error) {
	switch t {
	case "", openflow.GroupTypeSelect:
		return 1, nil
	case "all":
		return 0, nil
	case "indirect":
		return 2, nil
	case "ff", "fast_failover":
		return 3, nil
	}
	return 0, fmt.Errorf("unknown group type %q", t)
}

// groupModHeader writes the header and fixed part of a group mod; it returns the message start
// and the offset of bucket_array_len.
func groupModHeader(w *buf, xid uint32, command uint16, typ uint8, id, cmdBucket uint32) int {
	start := w.header(typeGroupMod, xid)
	w.u16(command)
	w.u8(typ)
	w.u8(0)
	w.u32(id)
	w.u16(0) // bucket_array_len, set by the caller
	w.u16(0)
	w.u32(cmdBucket)
	return start
}

// appendBucket writes one OpenFlow 1.5 bucket; select buckets carry a weight property.
func appendBucket(w *buf, b *openflow.Bucket, weighted bool) error {
	start := len(w.b)
	w.u16(0) // len
	w.u16(0) // action_array_len
	w.u32(b.ID)
	if err := appendActions(w, b.Actions); err != nil {
		return fmt.Errorf("bucket %d: %w", b.ID, err)
	}
	actLen := len(w.b) - start - 8
	w.b[start+2], w.b[start+3] = byte(actLen>>8), byte(actLen)
	if weighted {
		w.u16(0) // OFPGBPT15_WEIGHT
		w.u16(8)
		w.u16(b.Weight)
		w.u16(0)
	}
	w.setLen16(start, 0)
	return nil
}

// appendSelectionMethod writes the Netronome selection-method group property.
func appendSelectionMethod(w *buf, g *openflow.Group) error {
	method := g.SelectionMethod
	if method == "" {
		method = "hash"
	}
	if method == "default" {
		return nil
	}
	if len(method) > 15 {
		return fmt.Errorf("selection method %q is too long", method)
	}
	start := len(w.b)
	w.u16(0xffff)
	w.u16(0)
	w.u32(ntrVendor)
	w.u32(1) // NTRT_SELECTION_METHOD
	w.u32(0)
	var name [16]byte
	copy(name[:], method)
	w.bytes(name[:])
	w.u64(g.SelectionParam)
	for _, f := range g.HashFields {
		h, ok := hashFieldHeaders[f]
		if !ok {
			return fmt.Errorf("unknown hash field %q", f)
		}
		// Open vSwitch writes each field as its unmasked header followed by an all-ones value.
		w.u32(uint32(h))
		for i := 0; i < h.size(); i++ {
			w.u8(0xff)
		}
	}
	w.setLen16(start, 2)
	w.pad8(start)
	return nil
}
