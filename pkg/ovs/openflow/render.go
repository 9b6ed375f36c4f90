package openflow

import (
	"fmt"
	"strconv"
	"strings"
)

// The rendering follows the field order and spelling that `ovs-ofctl -O OpenFlow15 dump-flows`
// prints, so a rendered flow and a dumped flow read alike. Every function here is canonical: the
// same model always renders to the same text.

// FormatFlow renders a flow as ovs-ofctl's add-flow syntax:
// "table=T,priority=P,cookie=0xC,<match> actions=<actions>".
func FormatFlow(f *Flow) string {
	var b strings.Builder
	b.WriteString(FormatFlowKey(f))
	if f.Cookie != 0 {
		fmt.Fprintf(&b, ",cookie=%#x", f.Cookie)
	}
	if f.IdleTimeout != 0 {
		fmt.Fprintf(&b, ",idle_timeout=%d", f.IdleTimeout)
	}
	if f.HardTimeout != 0 {
		fmt.Fprintf(&b, ",hard_timeout=%d", f.HardTimeout)
	}
	b.WriteString(" actions=")
	b.WriteString(FormatActions(f.Actions))
	return b.String()
}

// FormatFlowKey renders what identifies a flow for strict modify and delete: table, priority and
// match.
func FormatFlowKey(f *Flow) string {
	m := FormatMatch(&f.Match)
	s := fmt.Sprintf("table=%d,priority=%d", f.Table, f.Priority)
	if m != "" {
		s += "," + m
	}
	return s
}

// FormatCookieFilter renders a cookie/mask selector ("cookie=0x1/0xff").
func FormatCookieFilter(cookie, mask uint64) string {
	if mask == 0 {
		mask = ^uint64(0)
	}
	return fmt.Sprintf("cookie=%#x/%#x", cookie, mask)
}

// FormatMatch renders a match in OVS's dump order.
func FormatMatch(m *Match) string {
	var p []string
	if m.PktMark != nil {
		p = append(p, "pkt_mark="+formatMasked32(*m.PktMark))
	}
	if m.CtState != nil {
		p = append(p, "ct_state="+FormatCtState(*m.CtState))
	}
	if m.CtMark != nil {
		p = append(p, "ct_mark="+formatMasked32(*m.CtMark))
	}
	if proto := protocolKeyword(m.EthType, m.IPProto); proto != "" {
		p = append(p, proto)
	} else if m.EthType != EthTypeAny {
		p = append(p, fmt.Sprintf("dl_type=%#06x", uint16(m.EthType)))
	}
	for _, r := range m.Regs {
		p = append(p, fmt.Sprintf("reg%d=%s", r.Reg, formatMasked32(Masked32{r.Value, r.Mask})))
	}
	for _, r := range m.XXRegs {
		p = append(p, fmt.Sprintf("xxreg%d=%s", r.XXReg, formatMasked128(r.Value, r.Mask)))
	}
	if m.InPort != 0 {
		p = append(p, "in_port="+strconv.FormatUint(uint64(m.InPort), 10))
	}
	if len(m.EthSrc) != 0 {
		p = append(p, "dl_src="+m.EthSrc.String())
	}
	if len(m.EthDst) != 0 {
		p = append(p, "dl_dst="+m.EthDst.String())
	}
	srcKey, dstKey := "nw_src", "nw_dst"
	if m.EthType == EthTypeIPv6 {
		srcKey, dstKey = "ipv6_src", "ipv6_dst"
	}
	if m.Src.IsValid() {
		p = append(p, srcKey+"="+formatPrefix(m.Src.Addr().String(), m.Src.Bits(), m.Src.Addr().BitLen()))
	}
	if m.Dst.IsValid() {
		p = append(p, dstKey+"="+formatPrefix(m.Dst.Addr().String(), m.Dst.Bits(), m.Dst.Addr().BitLen()))
	}
	if m.ARPTPA.IsValid() {
		p = append(p, "arp_tpa="+m.ARPTPA.String())
	}
	if m.ARPOp != 0 {
		p = append(p, "arp_op="+strconv.Itoa(int(m.ARPOp)))
	}
	if m.TpSrc != 0 {
		p = append(p, "tp_src="+strconv.Itoa(int(m.TpSrc)))
	}
	if m.TpDst != 0 {
		p = append(p, "tp_dst="+strconv.Itoa(int(m.TpDst)))
	}
	return strings.Join(p, ",")
}

func formatPrefix(addr string, bits, bitLen int) string {
	if bits == bitLen {
		return addr
	}
	return addr + "/" + strconv.Itoa(bits)
}

// protocolKeyword returns OVS's shorthand for an eth type and IP protocol pair, or "" when there
// is none (the caller then spells dl_type out).
func protocolKeyword(et EthType, proto IPProto) string {
	v6 := ""
	switch et {
	case EthTypeIP:
	case EthTypeIPv6:
		v6 = "6"
	case EthTypeARP:
		if proto == ProtoAny {
			return "arp"
		}
		return ""
	default:
		return ""
	}
	switch proto {
	case ProtoAny:
		if v6 != "" {
			return "ipv6"
		}
		return "ip"
	case ProtoTCP:
		return "tcp" + v6
	case ProtoUDP:
		return "udp" + v6
	case ProtoSCTP:
		return "sctp" + v6
	case ProtoICMP:
		if v6 == "" {
			return "icmp"
		}
	case ProtoICMPv6:
		if v6 != "" {
			return "icmp6"
		}
	}
	return ""
}

func formatMasked32(m Masked32) string {
	if m.Mask == 0 || m.Mask == ^uint32(0) {
		return fmt.Sprintf("%#x", m.Value)
	}
	return fmt.Sprintf("%#x/%#x", m.Value, m.Mask)
}

func formatUint128(v Uint128) string {
	if v.Hi == 0 {
		return fmt.Sprintf("%#x", v.Lo)
	}
	return fmt.Sprintf("%#x%016x", v.Hi, v.Lo)
}

func formatMasked128(v, m Uint128) string {
	if m == (Uint128{}) || m == (Uint128{^uint64(0), ^uint64(0)}) {
		return formatUint128(v)
	}
	return formatUint128(v) + "/" + formatUint128(m)
}

var ctStateNames = []struct {
	flag CtStateFlags
	name string
}{
	{CtNew, "new"}, {CtEst, "est"}, {CtRel, "rel"}, {CtRpl, "rpl"},
	{CtInv, "inv"}, {CtTrk, "trk"}, {CtSNAT, "snat"}, {CtDNAT, "dnat"},
}

// FormatCtState renders conntrack state flags in OVS's bit order, e.g. "+new-est+trk".
func FormatCtState(s CtState) string {
	var b strings.Builder
	for _, n := range ctStateNames {
		switch {
		case s.Set&n.flag != 0:
			b.WriteString("+" + n.name)
		case s.Unset&n.flag != 0:
			b.WriteString("-" + n.name)
		}
	}
	return b.String()
}

// FormatActions renders an action list; an empty list renders as "drop".
func FormatActions(actions []Action) string {
	if len(actions) == 0 {
		return "drop"
	}
	parts := make([]string, 0, len(actions))
	for _, a := range actions {
		parts = append(parts, FormatAction(a))
	}
	return strings.Join(parts, ",")
}

// FormatAction renders one action.
func FormatAction(a Action) string {
	switch a := a.(type) {
	case CT:
		return formatCT(a)
	case GroupAction:
		return fmt.Sprintf("group:%d", a.ID)
	case GotoTable:
		return fmt.Sprintf("goto_table:%d", a.Table)
	case Resubmit:
		return fmt.Sprintf("resubmit(,%d)", a.Table)
	case SetReg:
		return fmt.Sprintf("set_field:%s->reg%d", formatMasked32(Masked32{a.Value, a.Mask}), a.Reg)
	case SetCtMark:
		return fmt.Sprintf("set_field:%s->ct_mark", formatMasked32(Masked32{a.Value, a.Mask}))
	case SetEthDst:
		return "set_field:" + a.MAC.String() + "->eth_dst"
	case SetEthSrc:
		return "set_field:" + a.MAC.String() + "->eth_src"
	case Move:
		return "move:" + FormatSubfield(a.Src) + "->" + FormatSubfield(a.Dst)
	case Learn:
		return formatLearn(a)
	case Output:
		return fmt.Sprintf("output:%d", a.Port)
	case OutputInPort:
		return "IN_PORT"
	case Normal:
		return "NORMAL"
	case Drop:
		return "drop"
	case Controller:
		return formatController(a)
	}
	panic(fmt.Sprintf("openflow: unknown action type %T", a))
}

func formatCT(a CT) string {
	var p []string
	if a.Commit {
		p = append(p, "commit")
	}
	if a.HasTable {
		p = append(p, fmt.Sprintf("table=%d", a.Table))
	}
	p = append(p, fmt.Sprintf("zone=%d", a.Zone))
	if a.NAT != nil {
		p = append(p, formatNAT(*a.NAT))
	}
	if len(a.Exec) > 0 {
		ex := make([]string, 0, len(a.Exec))
		for _, e := range a.Exec {
			ex = append(ex, FormatAction(e))
		}
		p = append(p, "exec("+strings.Join(ex, ",")+")")
	}
	return "ct(" + strings.Join(p, ",") + ")"
}

func formatNAT(n NAT) string {
	if n.Kind == NATReply {
		return "nat"
	}
	kind := "dst"
	if n.Kind == NATSrc {
		kind = "src"
	}
	addr := n.Addr.String()
	if n.Addr.Is6() {
		addr = "[" + addr + "]"
	}
	if n.Port != 0 {
		addr += ":" + strconv.Itoa(int(n.Port))
	}
	return "nat(" + kind + "=" + addr + ")"
}

// FormatSubfield renders a subfield as NXM_NX_REG0[], NXM_NX_REG0[3] or NXM_NX_REG0[0..15].
func FormatSubfield(s Subfield) string {
	switch {
	case s.Whole:
		return s.Field + "[]"
	case s.Start == s.End:
		return fmt.Sprintf("%s[%d]", s.Field, s.Start)
	default:
		return fmt.Sprintf("%s[%d..%d]", s.Field, s.Start, s.End)
	}
}

func formatLearn(l Learn) string {
	p := []string{fmt.Sprintf("table=%d", l.Table)}
	if l.IdleTimeout != 0 {
		p = append(p, fmt.Sprintf("idle_timeout=%d", l.IdleTimeout))
	}
	if l.HardTimeout != 0 {
		p = append(p, fmt.Sprintf("hard_timeout=%d", l.HardTimeout))
	}
	if l.FinIdleTimeout != 0 {
		p = append(p, fmt.Sprintf("fin_idle_timeout=%d", l.FinIdleTimeout))
	}
	if l.FinHardTimeout != 0 {
		p = append(p, fmt.Sprintf("fin_hard_timeout=%d", l.FinHardTimeout))
	}
	p = append(p, fmt.Sprintf("priority=%d", l.Priority))
	if l.DeleteLearned {
		p = append(p, "delete_learned")
	}
	if l.Cookie != 0 {
		p = append(p, fmt.Sprintf("cookie=%#x", l.Cookie))
	}
	if l.EthType != EthTypeAny {
		p = append(p, fmt.Sprintf("eth_type=%#x", uint16(l.EthType)))
	}
	if l.IPProto != ProtoAny {
		p = append(p, fmt.Sprintf("nw_proto=%d", l.IPProto))
	}
	for _, s := range l.Specs {
		switch s.Kind {
		case LearnMatch:
			if s.Src.Field == "" {
				p = append(p, FormatSubfield(s.Dst))
			} else {
				p = append(p, FormatSubfield(s.Dst)+"="+FormatSubfield(s.Src))
			}
		case LearnMatchValue:
			p = append(p, fmt.Sprintf("%s=%#x", FormatSubfield(s.Dst), s.Value))
		case LearnLoad:
			p = append(p, "load:"+FormatSubfield(s.Src)+"->"+FormatSubfield(s.Dst))
		case LearnLoadValue:
			p = append(p, fmt.Sprintf("load:%#x->%s", s.Value, FormatSubfield(s.Dst)))
		}
	}
	return "learn(" + strings.Join(p, ",") + ")"
}

func formatController(c Controller) string {
	if c.Reason == "" && c.MaxLen == 0 && len(c.UserData) == 0 && !c.Pause {
		return "CONTROLLER:65535"
	}
	var p []string
	if c.Reason != "" {
		p = append(p, "reason="+c.Reason)
	}
	maxLen := c.MaxLen
	if maxLen == 0 {
		maxLen = 65535
	}
	p = append(p, fmt.Sprintf("max_len=%d", maxLen))
	if len(c.UserData) > 0 {
		hex := make([]string, len(c.UserData))
		for i, b := range c.UserData {
			hex[i] = fmt.Sprintf("%02x", b)
		}
		p = append(p, "userdata="+strings.Join(hex, "."))
	}
	if c.Pause {
		p = append(p, "pause")
	}
	return "controller(" + strings.Join(p, ",") + ")"
}

// FormatBucket renders one bucket: "bucket=bucket_id:N,weight:W,actions=...".
func FormatBucket(b *Bucket) string {
	return fmt.Sprintf("bucket=bucket_id:%d,weight:%d,actions=%s", b.ID, b.Weight, FormatActions(b.Actions))
}

// FormatGroupHeader renders a group without its buckets.
func FormatGroupHeader(g *Group) string {
	typ := g.Type
	if typ == "" {
		typ = GroupTypeSelect
	}
	s := fmt.Sprintf("group_id=%d,type=%s", g.ID, typ)
	if typ == GroupTypeSelect {
		s += ",selection_method=hash"
		if len(g.HashFields) > 0 {
			s += ",fields(" + strings.Join(g.HashFields, ",") + ")"
		}
	}
	return s
}

// FormatGroup renders a whole group in ovs-ofctl's add-group syntax.
func FormatGroup(g *Group) string {
	var b strings.Builder
	b.WriteString(FormatGroupHeader(g))
	for i := range g.Buckets {
		b.WriteByte(',')
		b.WriteString(FormatBucket(&g.Buckets[i]))
	}
	return b.String()
}
