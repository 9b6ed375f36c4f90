package native

import (
	"encoding/binary"
	"fmt"
)

// OpenFlow 1.4+ flow monitor (OFPMP_FLOW_MONITOR): the switch reports every change of the flows
// it monitors as it happens, in multipart replies with xid 0. A change made by the monitoring
// connection itself is abbreviated to one update carrying the xid of the request that made it
// (unless OFPFMF_NO_ABBREV), so a writer that also monitors learns only of the other writers'
// changes in full.
const (
	multipartFlowMonitor uint16 = 16 // OFPMP_FLOW_MONITOR

	// Request flags (ofp_flow_monitor_flags).
	monitorFlagAdd     uint16 = 1 << 1 // OFPFMF_ADD
	monitorFlagRemoved uint16 = 1 << 2 // OFPFMF_REMOVED
	monitorFlagModify  uint16 = 1 << 3 // OFPFMF_MODIFY

	monitorCommandAdd uint8 = 0 // OFPFMC_ADD

	// flowUpdateHeaderLen is an update's length and event; flowUpdateFullLen the fixed part of
	// a full update (table, reason, timeouts, priority, cookie) before its match.
	flowUpdateHeaderLen = 4
	flowUpdateFullLen   = 24
)

// FlowEvent is the event of one flow update (ofp_flow_update_event).
type FlowEvent uint16

// Flow update events.
const (
	FlowInitial  FlowEvent = 0 // a flow present when the monitor was created (not requested here)
	FlowAdded    FlowEvent = 1
	FlowRemoved  FlowEvent = 2
	FlowModified FlowEvent = 3
	// FlowAbbrev stands for the changes of one request of the monitoring connection itself.
	FlowAbbrev FlowEvent = 4
	// FlowPaused: the switch stopped reporting (its queue to the connection is full); FlowResumed
	// follows with what changed meanwhile.
	FlowPaused  FlowEvent = 5
	FlowResumed FlowEvent = 6
)

// FlowUpdate is one update of a flow monitor reply. Table is set for the full updates (added,
// removed, modified), Xid for an abbreviated one.
type FlowUpdate struct {
	Event FlowEvent
	Table uint8
	Xid   uint32
}

// encodeFlowMonitorRequest is the request that adds monitor id over every table and flow
// (empty match, any output port and group) for additions, removals and modifications, without
// the initial flows: what `ovs-ofctl -O OpenFlow15 monitor <bridge> 'watch:!initial,!own,!actions'`
// sends.
func encodeFlowMonitorRequest(xid, id uint32) []byte {
	var w buf
	start := w.header(typeMultipartRequest, xid)
	w.u16(multipartFlowMonitor)
	w.u16(0) // flags
	w.zeros(4)
	w.u32(id)
	w.u32(portAny)
	w.u32(groupAny)
	w.u16(monitorFlagAdd | monitorFlagRemoved | monitorFlagModify)
	w.u8(tableAll)
	w.u8(monitorCommandAdd)
	m := len(w.b)
	w.u16(1) // OFPMT_OXM
	w.u16(4) // no fields
	w.pad8(m)
	w.setLen16(start, 2)
	return w.b
}

// decodeFlowUpdates calls each for every update of one flow monitor reply message.
func decodeFlowUpdates(msg []byte, each func(FlowUpdate)) error {
	if len(msg) < multipartHeaderLen || msg[1] != typeMultipartReply {
		return fmt.Errorf("flow monitor reply: not a multipart reply (%d bytes)", len(msg))
	}
	if t := binary.BigEndian.Uint16(msg[headerLen:]); t != multipartFlowMonitor {
		return fmt.Errorf("flow monitor reply: multipart type %d, want %d", t, multipartFlowMonitor)
	}
	if n := int(binary.BigEndian.Uint16(msg[2:])); n != len(msg) {
		return fmt.Errorf("flow monitor reply: length field %d, message of %d bytes", n, len(msg))
	}
	for body := msg[multipartHeaderLen:]; len(body) > 0; {
		if len(body) < flowUpdateHeaderLen {
			return fmt.Errorf("flow monitor reply: %d trailing bytes", len(body))
		}
		n := int(binary.BigEndian.Uint16(body))
		if n < flowUpdateHeaderLen || n > len(body) {
			return fmt.Errorf("flow monitor reply: update of length %d with %d bytes left", n, len(body))
		}
		u := FlowUpdate{Event: FlowEvent(binary.BigEndian.Uint16(body[2:]))}
		switch u.Event {
		case FlowInitial, FlowAdded, FlowRemoved, FlowModified:
			if n < flowUpdateFullLen {
				return fmt.Errorf("flow monitor reply: full update of %d bytes", n)
			}
			u.Table = body[4]
		case FlowAbbrev:
			if n < flowUpdateHeaderLen+4 {
				return fmt.Errorf("flow monitor reply: abbreviated update of %d bytes", n)
			}
			u.Xid = binary.BigEndian.Uint32(body[4:])
		}
		each(u)
		body = body[n:]
	}
	return nil
}
