package native

import (
	"encoding/binary"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/ofconn"
)

// ofVersion is the OpenFlow version this package speaks: 1.5 (wire version 0x06).
const ofVersion = ofconn.Version15

// OpenFlow 1.5 message types used here (the connection's own are ofconn's).
const (
	typeHello                  = ofconn.TypeHello
	typeError                  = ofconn.TypeError
	typeEchoRequest            = ofconn.TypeEchoRequest
	typeEchoReply              = ofconn.TypeEchoReply
	typeFeaturesRequest        = ofconn.TypeFeaturesRequest
	typeFeaturesReply          = ofconn.TypeFeaturesReply
	typeGetConfigRequest uint8 = 7
	typeGetConfigReply   uint8 = 8
	typeFlowMod          uint8 = 14
	typeGroupMod         uint8 = 15
	typeMultipartRequest       = ofconn.TypeMultipartReq
	typeMultipartReply         = ofconn.TypeMultipartReply
	typeBarrierRequest         = ofconn.TypeBarrierRequest
	typeBarrierReply           = ofconn.TypeBarrierReply
	typeBundleControl          = ofconn.TypeBundleControl
	typeBundleAdd        uint8 = 34
)

// Bundle control types and flags (ofp14 bundle_ctrl_type, bundle_flags).
const (
	bundleOpenRequest    uint16 = 0
	bundleOpenReply      uint16 = 1
	bundleCommitRequest  uint16 = 4
	bundleCommitReply    uint16 = 5
	bundleDiscardRequest uint16 = 6

	bundleAtomic  uint16 = 1
	bundleOrdered uint16 = 2
)

// Error types and codes this package interprets.
const (
	errTypeBadRequest      uint16 = 1
	errTypeBundleFailed    uint16 = 17
	errCodeBundleMsgFailed uint16 = 13
)

const (
	headerLen = 8
	// maxMessageLen is OpenFlow's limit on one message: its length field is 16 bits.
	maxMessageLen = 0xffff
)

// Reserved ports and ids.
const (
	portInPort     uint32 = 0xfffffff8
	portNormal     uint32 = 0xfffffffa
	portController uint32 = 0xfffffffd
	portAny        uint32 = 0xffffffff
	groupAny       uint32 = 0xffffffff
	noBuffer       uint32 = 0xffffffff
	tableAll       uint8  = 0xff
)

// Nicira and ONF experimenter ids.
const (
	nxVendor  uint32 = 0x00002320
	ntrVendor uint32 = 0x0000154d
)

// buf is an append-only big-endian message builder.
type buf struct{ b []byte }

func (w *buf) u8(v uint8)     { w.b = append(w.b, v) }
func (w *buf) u16(v uint16)   { w.b = binary.BigEndian.AppendUint16(w.b, v) }
func (w *buf) u32(v uint32)   { w.b = binary.BigEndian.AppendUint32(w.b, v) }
func (w *buf) u64(v uint64)   { w.b = binary.BigEndian.AppendUint64(w.b, v) }
func (w *buf) bytes(p []byte) { w.b = append(w.b, p...) }
func (w *buf) zeros(n int) {
	for ; n > 0; n-- {
		w.b = append(w.b, 0)
	}
}

// pad8 zero-pads from start to a multiple of 8 bytes.
func (w *buf) pad8(start int) {
	if r := (len(w.b) - start) % 8; r != 0 {
		w.zeros(8 - r)
	}
}

// setLen16 writes the length of everything from start at off (relative to start).
func (w *buf) setLen16(start, off int) {
	binary.BigEndian.PutUint16(w.b[start+off:], uint16(len(w.b)-start))
}

// header starts a message of type t; finish it with setLen16(start, 2).
func (w *buf) header(t uint8, xid uint32) int {
	start := len(w.b)
	w.u8(ofVersion)
	w.u8(t)
	w.u16(0)
	w.u32(xid)
	return start
}
