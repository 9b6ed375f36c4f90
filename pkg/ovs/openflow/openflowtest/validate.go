package openflowtest

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// Errors a rejected Apply wraps (test with errors.Is). Where OVS has an OpenFlow error code for
// the same mistake, the error text is that code.
var (
	// ErrMalformed: the op itself is unusable (unknown kind, nil Flow or Group, nil or unknown
	// action type).
	ErrMalformed = errors.New("malformed op")
	// ErrBadPrereq: a match field is set without the match fields it requires.
	ErrBadPrereq = errors.New("OFPBMC_BAD_PREREQ")
	// ErrBadMatch: a match field has an invalid value.
	ErrBadMatch = errors.New("OFPBMC_BAD_VALUE")
	// ErrBadAction: an action list OVS refuses (drop with other actions, ct misuse, bad
	// goto_table, invalid argument).
	ErrBadAction = errors.New("OFPBAC_BAD_ARGUMENT")
	// ErrBadGroup: a group OVS refuses (reserved or zero ID, duplicate bucket IDs).
	ErrBadGroup = errors.New("OFPGMFC_BAD_BUCKET")
	// ErrGroupExists: AddGroup of an ID that is already installed.
	ErrGroupExists = errors.New("OFPGMFC_GROUP_EXISTS")
	// ErrUnknownGroup: ModifyGroup of an ID that is not installed.
	ErrUnknownGroup = errors.New("OFPGMFC_UNKNOWN_GROUP")
	// ErrBadOutGroup: an action sends to a group that is not installed at that point of the batch.
	ErrBadOutGroup = errors.New("OFPBAC_BAD_OUT_GROUP")
)

// OpError is the error of a rejected Apply: which op of the batch failed and why.
type OpError struct {
	Index  int
	Kind   openflow.OpKind
	Object string // the op's flow or group in ovs-ofctl text
	Err    error
}

func (e *OpError) Error() string {
	return fmt.Sprintf("op %d (%s %s): %v", e.Index, e.Kind, e.Object, e.Err)
}

func (e *OpError) Unwrap() error { return e.Err }

const (
	maxGroupID  = 0xffffff00 // OFPG_MAX; larger IDs are reserved.
	maxBucketID = 0xffffff00 // OFPG15_BUCKET_MAX.
	numRegs     = 16
	numXXRegs   = 4
)

// opObject renders what an op acts on, for error messages. It never panics, even on input
// that the renderer cannot handle (nil or unknown actions).
func opObject(op openflow.Op) (s string) {
	defer func() {
		if recover() != nil {
			s = "<unrenderable>"
		}
	}()
	switch op.Kind {
	case openflow.AddFlow, openflow.ModifyFlowStrict, openflow.DeleteFlowStrict:
		if op.Flow == nil {
			return "<nil flow>"
		}
		if op.Kind == openflow.DeleteFlowStrict {
			return openflow.FormatFlowKey(op.Flow)
		}
		return openflow.FormatFlow(op.Flow)
	case openflow.DeleteFlows:
		if op.Flow == nil {
			return "<nil flow>"
		}
		s := openflow.FormatCookieFilter(op.Flow.Cookie, op.Flow.CookieMask)
		if op.TableSet {
			s = fmt.Sprintf("table=%d,%s", op.Flow.Table, s)
		}
		return s
	case openflow.AddGroup, openflow.ModifyGroup:
		if op.Group == nil {
			return "<nil group>"
		}
		return openflow.FormatGroup(op.Group)
	case openflow.DeleteGroup:
		if op.Group == nil {
			return "<nil group>"
		}
		return fmt.Sprintf("group_id=%d", op.Group.ID)
	}
	return "<unknown op>"
}

// validateOp checks everything about an op that does not depend on the switch's state.
func validateOp(op openflow.Op) error {
	switch op.Kind {
	case openflow.AddFlow, openflow.ModifyFlowStrict:
		if op.Flow == nil {
			return fmt.Errorf("%w: %s without a flow", ErrMalformed, op.Kind)
		}
		if err := validateMatch(&op.Flow.Match); err != nil {
			return err
		}
		return validateActions(op.Flow.Actions, &op.Flow.Match, op.Flow.Table, false)
	case openflow.DeleteFlowStrict:
		if op.Flow == nil {
			return fmt.Errorf("%w: %s without a flow", ErrMalformed, op.Kind)
		}
		return validateMatch(&op.Flow.Match)
	case openflow.DeleteFlows:
		if op.Flow == nil {
			return fmt.Errorf("%w: %s without a flow carrying the cookie", ErrMalformed, op.Kind)
		}
		return nil
	case openflow.AddGroup, openflow.ModifyGroup:
		if op.Group == nil {
			return fmt.Errorf("%w: %s without a group", ErrMalformed, op.Kind)
		}
		return validateGroup(op.Group)
	case openflow.DeleteGroup:
		if op.Group == nil {
			return fmt.Errorf("%w: %s without a group", ErrMalformed, op.Kind)
		}
		return validateGroupID(op.Group.ID)
	}
	return fmt.Errorf("%w: unknown op kind %d", ErrMalformed, op.Kind)
}

func isIP(et openflow.EthType) bool {
	return et == openflow.EthTypeIP || et == openflow.EthTypeIPv6
}

func validateMatch(m *openflow.Match) error {
	mx := m.Ext()
	if m.IPProto != openflow.ProtoAny && !isIP(m.EthType) {
		return fmt.Errorf("ip_proto %d requires eth_type ip or ipv6 (%w)", m.IPProto, ErrBadPrereq)
	}
	if m.MatchesTpSrc() || m.TpDst != 0 {
		switch m.IPProto {
		case openflow.ProtoTCP, openflow.ProtoUDP, openflow.ProtoSCTP:
		default:
			return fmt.Errorf("tp_src/tp_dst require ip_proto tcp, udp or sctp, have %d (%w)", m.IPProto, ErrBadPrereq)
		}
	}
	if mx.TCPFlags != nil && m.IPProto != openflow.ProtoTCP {
		return fmt.Errorf("tcp_flags requires ip_proto tcp, have %d (%w)", m.IPProto, ErrBadPrereq)
	}
	if (mx.ICMPType != nil || mx.ICMPCode != nil) && m.IPProto != openflow.ProtoICMP && m.IPProto != openflow.ProtoICMPv6 {
		return fmt.Errorf("icmp_type/icmp_code require ip_proto icmp or icmpv6, have %d (%w)", m.IPProto, ErrBadPrereq)
	}
	if err := validatePrefix("src", m.Src, m.EthType); err != nil {
		return err
	}
	if err := validatePrefix("dst", m.Dst, m.EthType); err != nil {
		return err
	}
	if (mx.ARPTPA.IsValid() || mx.ARPOp != 0) && m.EthType != openflow.EthTypeARP {
		return fmt.Errorf("arp_tpa/arp_op require eth_type arp (%w)", ErrBadPrereq)
	}
	if mx.ARPTPA.IsValid() && !mx.ARPTPA.Is4() {
		return fmt.Errorf("arp_tpa %s is not IPv4 (%w)", mx.ARPTPA, ErrBadMatch)
	}
	if len(mx.EthSrc) != 0 && len(mx.EthSrc) != 6 || len(mx.EthDst) != 0 && len(mx.EthDst) != 6 {
		return fmt.Errorf("dl_src/dl_dst must be 6-byte MACs (%w)", ErrBadMatch)
	}
	if err := validateNeighborFields(m); err != nil {
		return err
	}
	if m.CtState != nil && m.CtState.Set&m.CtState.Unset != 0 {
		return fmt.Errorf("ct_state %s sets and clears the same bit (%w)", openflow.FormatCtState(*m.CtState), ErrBadMatch)
	}
	seen := map[uint8]bool{}
	for _, r := range m.Regs {
		if r.Reg >= numRegs {
			return fmt.Errorf("reg%d does not exist (%w)", r.Reg, ErrBadMatch)
		}
		if seen[r.Reg] {
			return fmt.Errorf("reg%d matched twice (%w)", r.Reg, ErrBadMatch)
		}
		seen[r.Reg] = true
	}
	seenXX := map[uint8]bool{}
	for _, r := range mx.XXRegs {
		if r.XXReg >= numXXRegs {
			return fmt.Errorf("xxreg%d does not exist (%w)", r.XXReg, ErrBadMatch)
		}
		if seenXX[r.XXReg] {
			return fmt.Errorf("xxreg%d matched twice (%w)", r.XXReg, ErrBadMatch)
		}
		seenXX[r.XXReg] = true
	}
	return nil
}

// validatePrefix checks an nw/ipv6 src or dst prefix against the match's eth type.
func validatePrefix(name string, p netip.Prefix, et openflow.EthType) error {
	if !p.IsValid() {
		return nil
	}
	switch et {
	case openflow.EthTypeIP, openflow.EthTypeARP:
		if !p.Addr().Is4() {
			return fmt.Errorf("%s prefix %s is not IPv4 but eth_type is %#04x (%w)", name, p, uint16(et), ErrBadMatch)
		}
	case openflow.EthTypeIPv6:
		if p.Addr().Is4() {
			return fmt.Errorf("%s prefix %s is not IPv6 but eth_type is ipv6 (%w)", name, p, ErrBadMatch)
		}
	default:
		return fmt.Errorf("%s prefix %s requires eth_type ip, ipv6 or arp (%w)", name, p, ErrBadPrereq)
	}
	return nil
}

// validateActions checks an action list of a flow (match and table given) or of a bucket
// (inBucket; no match context, as OVS checks buckets without one).
func validateActions(actions []openflow.Action, m *openflow.Match, table uint8, inBucket bool) error {
	for i, a := range actions {
		switch a := a.(type) {
		case openflow.Drop:
			if len(actions) > 1 {
				return fmt.Errorf("\"drop\" must not be accompanied by any other action (%w)", ErrBadAction)
			}
		case openflow.SetCtMark:
			return fmt.Errorf("cannot set ct_mark outside of a ct action's exec (%w)", ErrBadAction)
		case openflow.CT:
			if err := validateCT(a, m, inBucket); err != nil {
				return err
			}
		case openflow.GotoTable:
			if inBucket {
				return fmt.Errorf("goto_table is not allowed in a group bucket (%w)", ErrBadAction)
			}
			if i != len(actions)-1 {
				return fmt.Errorf("goto_table:%d must be the last action (%w)", a.Table, ErrBadAction)
			}
			if a.Table <= table {
				return fmt.Errorf("goto_table:%d must go to a table after %d (OFPBIC_BAD_TABLE_ID: %w)", a.Table, table, ErrBadAction)
			}
		case openflow.SetReg:
			if a.Reg >= numRegs {
				return fmt.Errorf("reg%d does not exist (%w)", a.Reg, ErrBadAction)
			}
		case openflow.SetEthDst:
			if len(a.MAC) != 6 {
				return fmt.Errorf("set eth_dst needs a 6-byte MAC (%w)", ErrBadAction)
			}
		case openflow.SetEthSrc:
			if len(a.MAC) != 6 {
				return fmt.Errorf("set eth_src needs a 6-byte MAC (%w)", ErrBadAction)
			}
		case openflow.Controller:
			switch a.Reason {
			case "", "no_match", "action", "invalid_ttl":
			default:
				return fmt.Errorf("controller reason %q is unknown (%w)", a.Reason, ErrBadAction)
			}
		case openflow.MeterAction:
			if i != 0 {
				return fmt.Errorf("meter must be the first action (%w)", ErrBadAction)
			}
		case openflow.GroupAction, openflow.Resubmit, openflow.Move, openflow.Learn,
			openflow.Output, openflow.OutputInPort, openflow.Normal:
		default:
			return fmt.Errorf("%w: action %d has unsupported type %T", ErrMalformed, i, a)
		}
	}
	return nil
}

func validateCT(a openflow.CT, m *openflow.Match, inBucket bool) error {
	if !inBucket && !isIP(m.EthType) {
		return fmt.Errorf("ct requires a match on eth_type ip or ipv6 (OFPBAC_MATCH_INCONSISTENT: %w)", ErrBadAction)
	}
	for i, e := range a.Exec {
		if _, ok := e.(openflow.SetCtMark); !ok {
			return fmt.Errorf("ct exec action %d is %T; only set ct_mark is allowed (%w)", i, e, ErrBadAction)
		}
	}
	if a.NAT != nil && a.NAT.Kind != openflow.NATReply {
		if !a.NAT.Addr.IsValid() {
			return fmt.Errorf("ct nat(src/dst) needs an address (%w)", ErrBadAction)
		}
		if a.NAT.PortMax != 0 && (a.NAT.Port == 0 || a.NAT.PortMax < a.NAT.Port) {
			return fmt.Errorf("ct nat port range %d-%d is empty (%w)", a.NAT.Port, a.NAT.PortMax, ErrBadAction)
		}
		if !inBucket && (a.NAT.Addr.Is4() != (m.EthType == openflow.EthTypeIP)) {
			return fmt.Errorf("ct nat address %s does not match the flow's eth_type (OFPBAC_MATCH_INCONSISTENT: %w)", a.NAT.Addr, ErrBadAction)
		}
	}
	needsCommit := len(a.Exec) > 0 || (a.NAT != nil && a.NAT.Kind != openflow.NATReply)
	if needsCommit && !a.Commit {
		return fmt.Errorf("ct with exec or nat(src/dst) requires commit (%w)", ErrBadAction)
	}
	return nil
}

func validateGroupID(id uint32) error {
	if id == 0 {
		return fmt.Errorf("group_id 0 is not allowed (unset ID) (%w)", ErrBadGroup)
	}
	if id > maxGroupID {
		return fmt.Errorf("group_id %#x is reserved (%w)", id, ErrBadGroup)
	}
	return nil
}

func validateGroup(g *openflow.Group) error {
	if err := validateGroupID(g.ID); err != nil {
		return err
	}
	if g.Type != "" && g.Type != openflow.GroupTypeSelect {
		return fmt.Errorf("group %d has unsupported type %q (%w)", g.ID, g.Type, ErrBadGroup)
	}
	for _, f := range g.HashFields {
		if f == "" || strings.ContainsAny(f, ",() ") {
			return fmt.Errorf("group %d has invalid hash field %q (%w)", g.ID, f, ErrBadGroup)
		}
	}
	seen := map[uint32]bool{}
	for i := range g.Buckets {
		b := &g.Buckets[i]
		if b.ID > maxBucketID {
			return fmt.Errorf("group %d bucket %d has reserved bucket_id %#x (%w)", g.ID, i, b.ID, ErrBadGroup)
		}
		if seen[b.ID] {
			return fmt.Errorf("group %d has duplicate bucket_id %d (%w)", g.ID, b.ID, ErrBadGroup)
		}
		seen[b.ID] = true
		if err := validateActions(b.Actions, nil, 0, true); err != nil {
			return fmt.Errorf("group %d bucket_id %d: %w", g.ID, b.ID, err)
		}
	}
	return nil
}

// groupRefs returns the IDs of the groups an action list sends to.
func groupRefs(actions []openflow.Action) []uint32 {
	var ids []uint32
	for _, a := range actions {
		if g, ok := a.(openflow.GroupAction); ok {
			ids = append(ids, g.ID)
		}
	}
	return ids
}

// OpIndex implements openflow.OpIndexer.
func (e *OpError) OpIndex() int { return e.Index }

// validateNeighborFields checks the ARP sender fields and the IPv6 neighbour discovery fields
// against their prerequisites, as OVS does.
func validateNeighborFields(m *openflow.Match) error {
	mx := m.Ext()
	if (mx.ARPSPA.IsValid() || len(mx.ARPSHA) != 0) && m.EthType != openflow.EthTypeARP {
		return fmt.Errorf("arp_spa/arp_sha require eth_type arp (%w)", ErrBadPrereq)
	}
	if mx.ARPSPA.IsValid() && !mx.ARPSPA.Is4() {
		return fmt.Errorf("arp_spa %s is not IPv4 (%w)", mx.ARPSPA, ErrBadMatch)
	}
	for _, mac := range []net.HardwareAddr{mx.ARPSHA, mx.NDSLL, mx.NDTLL} {
		if len(mac) != 0 && len(mac) != 6 {
			return fmt.Errorf("arp_sha/nd_sll/nd_tll must be 6-byte MACs (%w)", ErrBadMatch)
		}
	}
	if !mx.NDTarget.IsValid() && len(mx.NDSLL) == 0 && len(mx.NDTLL) == 0 {
		return nil
	}
	nd := m.EthType == openflow.EthTypeIPv6 && m.IPProto == openflow.ProtoICMPv6 && mx.ICMPType != nil &&
		(mx.ICMPCode == nil || *mx.ICMPCode == 0)
	if !nd || (*mx.ICMPType != 135 && *mx.ICMPType != 136) {
		return fmt.Errorf("nd_target/nd_sll/nd_tll require icmp6 with icmp_type 135 or 136 and icmp_code 0 (%w)", ErrBadPrereq)
	}
	if len(mx.NDSLL) != 0 && *mx.ICMPType != 135 || len(mx.NDTLL) != 0 && *mx.ICMPType != 136 {
		return fmt.Errorf("nd_sll requires icmp_type 135, nd_tll icmp_type 136 (%w)", ErrBadPrereq)
	}
	if mx.NDTarget.IsValid() && !mx.NDTarget.Is6() {
		return fmt.Errorf("nd_target %s is not IPv6 (%w)", mx.NDTarget, ErrBadMatch)
	}
	return nil
}
