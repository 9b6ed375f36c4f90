package native

import (
	"encoding/binary"
	"fmt"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// SwitchError is an OpenFlow error message from the switch.
type SwitchError struct {
	Xid  uint32
	Type uint16
	Code uint16
	// Data is the start of the offending request.
	Data []byte
}

func (e *SwitchError) Error() string { return errorName(e.Type, e.Code) }

func decodeError(msg []byte) *SwitchError {
	e := &SwitchError{Xid: binary.BigEndian.Uint32(msg[4:])}
	if len(msg) >= headerLen+4 {
		e.Type = binary.BigEndian.Uint16(msg[headerLen:])
		e.Code = binary.BigEndian.Uint16(msg[headerLen+2:])
		e.Data = append([]byte(nil), msg[headerLen+4:]...)
	}
	return e
}

// errorNames name the codes of the OpenFlow error types a bundle of flow and group mods, or a
// meter mod, can meet, as ovs-ofctl prints them.
var errorNames = map[uint16]struct {
	prefix string
	codes  []string
}{
	1: {"OFPBRC_", []string{"BAD_VERSION", "BAD_TYPE", "BAD_MULTIPART", "BAD_EXPERIMENTER", "BAD_EXP_TYPE", "EPERM", "BAD_LEN",
		"BUFFER_EMPTY", "BUFFER_UNKNOWN", "BAD_TABLE_ID", "IS_SLAVE", "BAD_PORT", "BAD_PACKET", "MULTIPART_BUFFER_OVERFLOW"}},
	2: {"OFPBAC_", []string{"BAD_TYPE", "BAD_LEN", "BAD_EXPERIMENTER", "BAD_EXP_TYPE", "BAD_OUT_PORT", "BAD_ARGUMENT", "EPERM",
		"TOO_MANY", "BAD_QUEUE", "BAD_OUT_GROUP", "MATCH_INCONSISTENT", "UNSUPPORTED_ORDER", "BAD_TAG", "BAD_SET_TYPE",
		"BAD_SET_LEN", "BAD_SET_ARGUMENT"}},
	3: {"OFPBIC_", []string{"UNKNOWN_INST", "UNSUP_INST", "BAD_TABLE_ID", "UNSUP_METADATA", "UNSUP_METADATA_MASK",
		"BAD_EXPERIMENTER", "BAD_EXP_TYPE", "BAD_LEN", "EPERM"}},
	4: {"OFPBMC_", []string{"BAD_TYPE", "BAD_LEN", "BAD_TAG", "BAD_DL_ADDR_MASK", "BAD_NW_ADDR_MASK", "BAD_WILDCARDS",
		"BAD_FIELD", "BAD_VALUE", "BAD_MASK", "BAD_PREREQ", "DUP_FIELD", "EPERM"}},
	5: {"OFPFMFC_", []string{"UNKNOWN", "TABLE_FULL", "BAD_TABLE_ID", "OVERLAP", "EPERM", "BAD_TIMEOUT", "BAD_COMMAND", "BAD_FLAGS"}},
	6: {"OFPGMFC_", []string{"GROUP_EXISTS", "INVALID_GROUP", "WEIGHT_UNSUPPORTED", "OUT_OF_GROUPS", "OUT_OF_BUCKETS",
		"CHAINING_UNSUPPORTED", "WATCH_UNSUPPORTED", "LOOP", "UNKNOWN_GROUP", "CHAINED_GROUP", "BAD_TYPE", "BAD_COMMAND",
		"BAD_BUCKET", "BAD_WATCH", "EPERM", "UNKNOWN_BUCKET", "BUCKET_EXISTS"}},
	12: {"OFPMMFC_", []string{"UNKNOWN", "METER_EXISTS", "INVALID_METER", "UNKNOWN_METER", "BAD_COMMAND", "BAD_FLAGS",
		"BAD_RATE", "BAD_BURST", "BAD_BAND", "BAD_BAND_VALUE", "OUT_OF_METERS", "OUT_OF_BANDS"}},
	17: {"OFPBFC_", []string{"UNKNOWN", "EPERM", "BAD_ID", "BUNDLE_EXIST", "BUNDLE_CLOSED", "OUT_OF_BUNDLES", "BAD_TYPE",
		"BAD_FLAGS", "MSG_BAD_LEN", "MSG_BAD_XID", "MSG_UNSUP", "MSG_CONFLICT", "MSG_TOO_MANY", "MSG_FAILED", "TIMEOUT",
		"BUNDLE_IN_PROGRESS"}},
}

// errorName renders an OpenFlow error type and code, e.g. "OFPGMFC_GROUP_EXISTS".
func errorName(typ, code uint16) string {
	if n, ok := errorNames[typ]; ok && int(code) < len(n.codes) {
		return n.prefix + n.codes[code]
	}
	if typ == 0xffff {
		return fmt.Sprintf("experimenter error 0x%04x", code)
	}
	return fmt.Sprintf("OpenFlow error type %d code %d", typ, code)
}

// RejectedOpError is returned by Apply when the switch refused one op of the batch. The bundle
// is atomic, so none of the batch's ops took effect.
type RejectedOpError struct {
	// Target is the OpenFlow endpoint.
	Target string
	// Index is the op's position in the ops given to Apply.
	Index int
	Kind  openflow.OpKind
	// Part is 0 for an op's flow or group mod and k for its k-th insert-bucket continuation
	// (a group too large for one message).
	Part int
	// Text is the op rendered in ovs-ofctl syntax, truncated when long.
	Text string
	// Reason is what the switch said, e.g. "OFPGMFC_GROUP_EXISTS".
	Reason string
	// Err is the switch's error message.
	Err *SwitchError
}

func (e *RejectedOpError) Error() string {
	part := ""
	if e.Part > 0 {
		part = fmt.Sprintf(", bucket continuation %d", e.Part)
	}
	return fmt.Sprintf("openflow bundle %s: op %d (%s%s) rejected: %s; nothing in the batch was applied: %q",
		e.Target, e.Index, e.Kind, part, e.Reason, e.Text)
}

// OpIndex implements openflow.OpIndexer.
func (e *RejectedOpError) OpIndex() int { return e.Index }

// Unwrap returns the switch's error.
func (e *RejectedOpError) Unwrap() error { return e.Err }

// opText renders op as the ofctl backend's bundle line body would, truncated when long.
func opText(op *openflow.Op) string {
	var s string
	switch op.Kind {
	case openflow.AddFlow, openflow.ModifyFlowStrict:
		s = openflow.FormatFlow(op.Flow)
	case openflow.DeleteFlowStrict:
		s = openflow.FormatFlowKey(op.Flow)
	case openflow.DeleteFlows:
		s = openflow.FormatCookieFilter(op.Flow.Cookie, op.Flow.CookieMask)
		if op.TableSet {
			s += fmt.Sprintf(",table=%d", op.Flow.Table)
		}
	case openflow.DeleteGroup:
		s = fmt.Sprintf("group_id=%d", op.Group.ID)
	default:
		s = openflow.FormatGroup(op.Group)
	}
	if len(s) > 400 {
		s = s[:400] + fmt.Sprintf("...(%d more bytes)", len(s)-400)
	}
	return s
}
