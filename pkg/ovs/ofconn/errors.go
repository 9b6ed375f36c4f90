package ofconn

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Error is an OpenFlow error message from the switch.
type Error struct {
	Xid  uint32
	Type uint16
	Code uint16
	// Data is the start of the offending request, or a text for some errors.
	Data []byte
}

// Error names the error as ovs-ofctl prints it, e.g. "OFPGMFC_GROUP_EXISTS".
func (e *Error) Error() string { return ErrorName(e.Type, e.Code) }

// DecodeError decodes an error message (whole message).
func DecodeError(msg []byte) (*Error, error) {
	h, err := ParseHeader(msg)
	if err != nil {
		return nil, err
	}
	if len(msg) < headerLen+4 || int(h.Length) > len(msg) {
		return nil, errors.New("error message: truncated")
	}
	b := msg[headerLen:h.Length]
	return &Error{Xid: h.Xid, Type: binary.BigEndian.Uint16(b), Code: binary.BigEndian.Uint16(b[2:]), Data: append([]byte(nil), b[4:]...)}, nil
}

// errorNames name the codes of the OpenFlow error types that requests of this project (flow,
// group and meter mods, bundles, packet-outs) can meet, as ovs-ofctl prints them.
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

// ErrorName renders an OpenFlow error type and code, e.g. "OFPGMFC_GROUP_EXISTS".
func ErrorName(typ, code uint16) string {
	if n, ok := errorNames[typ]; ok && int(code) < len(n.codes) {
		return n.prefix + n.codes[code]
	}
	if typ == 0xffff {
		return fmt.Sprintf("experimenter error 0x%04x", code)
	}
	return fmt.Sprintf("OpenFlow error type %d code %d", typ, code)
}
