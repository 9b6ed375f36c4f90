package ofctl

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// RejectedOpError is returned by Apply when Open vSwitch (or ovs-ofctl's parser) rejected one op
// of the batch. The bundle is atomic, so none of the batch's ops took effect.
type RejectedOpError struct {
	// Target is the OpenFlow endpoint ovs-ofctl talked to.
	Target string
	// Index is the op's position in the ops given to Apply.
	Index int
	Kind  openflow.OpKind
	// Line is the 1-based bundle line that failed; Part is 0 for an op's first line and k for
	// its k-th insert_bucket continuation line (groups split across messages).
	Line int
	Part int
	// Text is the rendered bundle line, truncated when long.
	Text string
	// Reason is what OVS said, e.g. "OFPGMFC_GROUP_EXISTS" or "unknown action bogus".
	Reason string
}

func (e *RejectedOpError) Error() string {
	part := ""
	if e.Part > 0 {
		part = fmt.Sprintf(", bucket continuation %d", e.Part)
	}
	return fmt.Sprintf("ovs-ofctl bundle %s: op %d (%s%s, bundle line %d) rejected: %s; nothing in the batch was applied: %q",
		e.Target, e.Index, e.Kind, part, e.Line, e.Reason, e.Text)
}

// switchError is one "Error CODE for: MSG (xid=0xN)" report from ovs-ofctl.
type switchError struct {
	code    string // e.g. OFPGMFC_GROUP_EXISTS
	msgType string // e.g. OFPT_GROUP_MOD; empty when OVS could not decode the message
	xid     uint32
	hasXID  bool
	decoded string // the failing message as OVS printed it, truncated
}

// ofctlReport is what Apply learns from ovs-ofctl's standard error.
type ofctlReport struct {
	parseLine   int // 1-based line of a "ovs-ofctl: -:N: reason" parse error, 0 if none
	parseReason string
	errs        []switchError // excluding bundle-control errors
	commitXID   uint32
	hasCommit   bool
	summary     []string // the first few meaningful lines, truncated
}

var (
	errorLineRE = regexp.MustCompile(`^Error (\S+) for: (?:(OFPT_\w+|NXT_\w+|ONFT_\w+) )?(?:\(OF[0-9.x]+\) )?(?:\(xid=0x([0-9a-fA-F]+)\))?:?\s*(.*)$`)
	parseErrRE  = regexp.MustCompile(`^ovs-ofctl: -:(\d+): (.*)$`)
	hexFirstRE  = regexp.MustCompile(`^00000000  ([0-9a-f]{2}) ([0-9a-f]{2}) [0-9a-f]{2} [0-9a-f]{2} ([0-9a-f]{2}) ([0-9a-f]{2}) ([0-9a-f]{2}) ([0-9a-f]{2})-`)
)

const (
	maxSummaryLines = 6
	maxQuotedLen    = 400
	// OpenFlow 1.1+ message types of the mods a bundle carries.
	ofptFlowMod  = 14
	ofptGroupMod = 15
)

// parseStderr extracts errors from ovs-ofctl's standard error.
func parseStderr(stderr []byte) *ofctlReport {
	r := &ofctlReport{}
	lines := bytes.Split(stderr, []byte("\n"))
	var pending *switchError // the last error, whose decoded message may follow on the next line
	for _, raw := range lines {
		line := string(bytes.TrimRight(raw, "\r"))
		if strings.TrimSpace(line) == "" {
			continue
		}
		if m := errorLineRE.FindStringSubmatch(line); m != nil {
			r.addSummary(line)
			e := switchError{code: m[1], msgType: m[2], decoded: truncate(m[4], maxQuotedLen)}
			if m[3] != "" {
				if x, err := strconv.ParseUint(m[3], 16, 32); err == nil {
					e.xid, e.hasXID = uint32(x), true
				}
			}
			if strings.HasPrefix(e.decoded, "(***") { // undecodable message: a hex dump follows
				e.decoded = ""
			}
			if e.msgType == "OFPT_BUNDLE_CONTROL" || e.msgType == "ONFT_BUNDLE_CONTROL" {
				if e.hasXID {
					r.commitXID, r.hasCommit = e.xid, true
				}
				pending = nil
				continue
			}
			r.errs = append(r.errs, e)
			pending = &r.errs[len(r.errs)-1]
			continue
		}
		if m := parseErrRE.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			if r.parseLine == 0 {
				r.parseLine, r.parseReason = n, m[2]
			}
			r.addSummary(line)
			pending = nil
			continue
		}
		if m := hexFirstRE.FindStringSubmatch(line); m != nil {
			if pending != nil && !pending.hasXID {
				typ, _ := strconv.ParseUint(m[2], 16, 8)
				switch typ {
				case ofptFlowMod:
					pending.msgType = "OFPT_FLOW_MOD"
				case ofptGroupMod:
					pending.msgType = "OFPT_GROUP_MOD"
				}
				x, _ := strconv.ParseUint(m[3]+m[4]+m[5]+m[6], 16, 32)
				pending.xid, pending.hasXID = uint32(x), true
			}
			continue
		}
		if isHexDumpLine(line) {
			continue
		}
		if strings.HasPrefix(line, " ") {
			// The decoded message (or bundle control details) of the preceding error.
			if pending != nil && pending.decoded == "" {
				pending.decoded = truncate(strings.TrimSpace(line), maxQuotedLen)
			}
			continue
		}
		r.addSummary(line)
		pending = nil
	}
	return r
}

func isHexDumpLine(line string) bool {
	if len(line) < 10 || line[8] != ' ' || line[9] != ' ' {
		return false
	}
	for _, c := range line[:8] {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

func (r *ofctlReport) addSummary(line string) {
	if len(r.summary) < maxSummaryLines {
		r.summary = append(r.summary, truncate(line, maxQuotedLen))
	}
}

// String summarises the report for an error message.
func (r *ofctlReport) String() string {
	return strings.Join(r.summary, "; ")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("...(%d more bytes)", len(s)-n)
}

// firstXIDCandidates returns plausible transaction IDs of the first bundle line, best first.
// ovs-ofctl numbers the messages of a bundle consecutively, in file order, as it parses them;
// then opens the bundle and commits it, the commit request getting the last message's xid + 3
// (observed with OVS 2.x-3.x). Without a commit error, the connection set-up uses xids 1-5.
func (r *ofctlReport) firstXIDCandidates(nLines int) []uint32 {
	var c []uint32
	if r.hasCommit && r.commitXID > uint32(nLines)+2 {
		c = append(c, r.commitXID-uint32(nLines)-2)
	}
	if len(c) == 0 || c[0] != defaultFirstXID {
		c = append(c, defaultFirstXID)
	}
	return c
}

const defaultFirstXID = 6

// locate finds the bundle line (0-based) the first switch error refers to. consistent checks
// that the error plausibly belongs to a line (right message type, group id) to guard the xid
// arithmetic.
func (r *ofctlReport) locate(nLines int, consistent func(line int, e *switchError) bool) (int, *switchError, bool) {
	if r.parseLine > 0 && r.parseLine <= nLines {
		return r.parseLine - 1, nil, true
	}
	if len(r.errs) == 0 {
		return 0, nil, false
	}
	e := &r.errs[0]
	if !e.hasXID {
		return 0, e, false
	}
	for _, first := range r.firstXIDCandidates(nLines) {
		if e.xid < first {
			continue
		}
		line := int(e.xid - first)
		if line < nLines && consistent(line, e) {
			return line, e, true
		}
	}
	return 0, e, false
}

// groupIDRE finds the group id in a decoded group mod.
var groupIDRE = regexp.MustCompile(`group_id=(\d+)`)

// consistentWith reports whether error e can be about op: flow errors for flow ops, group errors
// for group ops with the same group id.
func consistentWith(op *openflow.Op, e *switchError) bool {
	switch op.Kind {
	case openflow.AddFlow, openflow.ModifyFlowStrict, openflow.DeleteFlowStrict, openflow.DeleteFlows:
		return e.msgType == "" || e.msgType == "OFPT_FLOW_MOD"
	default:
		if e.msgType != "" && e.msgType != "OFPT_GROUP_MOD" {
			return false
		}
		if m := groupIDRE.FindStringSubmatch(e.decoded); m != nil && op.Group != nil {
			return m[1] == strconv.FormatUint(uint64(op.Group.ID), 10)
		}
		return true
	}
}

// OpIndex implements openflow.OpIndexer.
func (e *RejectedOpError) OpIndex() int { return e.Index }
