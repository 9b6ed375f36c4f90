package native

import (
	"fmt"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/ofconn"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

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
	Err *ofconn.Error
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
