package ofctl

import (
	"bufio"
	"fmt"
	"strconv"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// DefaultMaxMessageBytes is the OpenFlow limit on one message: its length field is 16 bits.
const DefaultMaxMessageBytes = 65535

// Conservative per-element overheads used to estimate the encoded size of a group mod from its
// rendered text. The binary encoding of an action is never longer than its text plus
// actionOverhead (e.g. "output:1" is 8 characters and 16 bytes, "NORMAL" 6 and 16), and a bucket
// header with its weight property is never longer than bucketOverhead plus its text prefix.
const (
	actionOverhead = 16
	bucketOverhead = 32
	// groupModOverhead covers the bundle-add header (16 bytes) wrapping the group mod, the OpenFlow
	// 1.5 group mod header (24 bytes) and the selection-method property (40 bytes before fields).
	groupModOverhead = 128
	// hashFieldOverhead is the encoded size of one field of fields(...) (an OXM header, 4 bytes),
	// doubled for safety.
	hashFieldOverhead = 8
)

// lineRef says which op a bundle line was rendered from. Part is 0 for an op's first line and k
// for its k-th insert_bucket continuation line (a group too large for one message).
type lineRef struct {
	op   int32
	part int32
}

// bundleWriter renders ops into ovs-ofctl bundle lines and records which op each line came from.
type bundleWriter struct {
	w        *bufio.Writer
	maxBytes int
	lines    []lineRef
	scratch  []byte
}

func newBundleWriter(w *bufio.Writer, maxBytes int) *bundleWriter {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxMessageBytes
	}
	return &bundleWriter{w: w, maxBytes: maxBytes}
}

// validateOp checks that op carries what its kind needs, before anything is sent.
func validateOp(op *openflow.Op) error { return op.Check() }

// writeOp renders op (the i-th of its batch) as one or more bundle lines.
func (bw *bundleWriter) writeOp(i int, op *openflow.Op) error {
	switch op.Kind {
	case openflow.AddFlow:
		return bw.line(i, 0, "flow add ", openflow.FormatFlow(op.Flow))
	case openflow.ModifyFlowStrict:
		return bw.line(i, 0, "flow modify_strict ", openflow.FormatFlow(op.Flow))
	case openflow.DeleteFlowStrict:
		return bw.line(i, 0, "flow delete_strict ", openflow.FormatFlowKey(op.Flow))
	case openflow.DeleteFlows:
		sel := openflow.FormatCookieFilter(op.Flow.Cookie, op.Flow.CookieMask)
		if op.TableSet {
			sel += ",table=" + strconv.Itoa(int(op.Flow.Table))
		}
		return bw.line(i, 0, "flow delete ", sel)
	case openflow.AddGroup:
		return bw.group(i, "group add ", op.Group)
	case openflow.ModifyGroup:
		return bw.group(i, "group modify ", op.Group)
	case openflow.DeleteGroup:
		return bw.line(i, 0, "group delete ", "group_id="+strconv.FormatUint(uint64(op.Group.ID), 10))
	}
	return fmt.Errorf("unknown op kind %d", op.Kind)
}

func (bw *bundleWriter) line(op, part int, prefix, body string) error {
	bw.lines = append(bw.lines, lineRef{op: int32(op), part: int32(part)})
	_, _ = bw.w.WriteString(prefix)
	_, _ = bw.w.WriteString(body)
	return bw.w.WriteByte('\n')
}

// group writes an add or modify of g. Buckets that do not fit in one OpenFlow message go to
// following "group insert_bucket ...,command_bucket_id=last" lines, each within the limit; the
// bundle applies them all atomically with the first line.
//
// Only select groups (the agent's only type) are split: other types render as one line.
func (bw *bundleWriter) group(op int, prefix string, g *openflow.Group) error {
	if g.Type != "" && g.Type != openflow.GroupTypeSelect {
		return bw.line(op, 0, prefix, openflow.FormatGroup(g))
	}
	budget := bw.maxBytes - groupModOverhead - hashFieldOverhead*len(g.HashFields)
	header := openflow.FormatGroupHeader(g)
	bw.lines = append(bw.lines, lineRef{op: int32(op)})
	_, _ = bw.w.WriteString(prefix)
	_, _ = bw.w.WriteString(header)
	used, inLine, part := len(header), 0, 0
	for b := range g.Buckets {
		bucket := &g.Buckets[b]
		text := openflow.FormatBucket(bucket)
		size := estimateBucketBytes(bucket, len(text))
		if inLine > 0 && used+size > budget {
			part++
			bw.lines = append(bw.lines, lineRef{op: int32(op), part: int32(part)})
			_ = bw.w.WriteByte('\n')
			_, _ = bw.w.WriteString("group insert_bucket ")
			bw.scratch = strconv.AppendUint(append(bw.scratch[:0], "group_id="...), uint64(g.ID), 10)
			bw.scratch = append(bw.scratch, ",command_bucket_id=last"...)
			_, _ = bw.w.Write(bw.scratch)
			used, inLine = len(bw.scratch), 0
		}
		_ = bw.w.WriteByte(',')
		_, _ = bw.w.WriteString(text)
		used += size
		inLine++
	}
	return bw.w.WriteByte('\n')
}

// estimateBucketBytes bounds the encoded size of a bucket from its rendered length and its
// action count (see the overhead constants).
func estimateBucketBytes(b *openflow.Bucket, textLen int) int {
	return bucketOverhead + textLen + actionOverhead*countActions(b.Actions)
}

func countActions(actions []openflow.Action) int {
	n := len(actions)
	for _, a := range actions {
		if ct, ok := a.(openflow.CT); ok {
			n += countActions(ct.Exec)
			if ct.NAT != nil {
				n++
			}
		}
	}
	return n
}
