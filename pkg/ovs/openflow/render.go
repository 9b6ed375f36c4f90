package openflow

import (
	"fmt"
	"strconv"
	"strings"
)

// The rendering follows the field order and spelling that `ovs-ofctl -O OpenFlow15 dump-flows`
// prints, so a rendered flow and a dumped flow read alike. Every function here is canonical: the
// same model always renders to the same text.

// FormatFlow renders a flow as ovs-ofctl's add-flow syntax, in the order dump-flows prints it:
// "cookie=0xC,table=T,priority=P[,idle_timeout=I][,hard_timeout=H],<match> actions=<actions>".
func FormatFlow(f *Flow) string { return formatFlow(f, nil) }

// FormatFlowNamed renders a flow like FormatFlow, with n's names for tables and register fields
// (see Names); ParseFlowNamed reads it back. It is for display: keys and installed text stay
// numeric.
func FormatFlowNamed(f *Flow, n *Names) string { return formatFlow(f, n) }

func formatFlow(f *Flow, n *Names) string {
	var b strings.Builder
	b.Grow(160)
	if f.Cookie != 0 {
		b.WriteString("cookie=0x")
		b.WriteString(strconv.FormatUint(f.Cookie, 16))
		b.WriteByte(',')
	}
	b.WriteString("table=")
	b.WriteString(n.table(f.Table))
	b.WriteString(",priority=")
	b.WriteString(strconv.Itoa(int(f.Priority)))
	if f.IdleTimeout != 0 {
		b.WriteString(",idle_timeout=")
		b.WriteString(strconv.Itoa(int(f.IdleTimeout)))
	}
	if f.HardTimeout != 0 {
		b.WriteString(",hard_timeout=")
		b.WriteString(strconv.Itoa(int(f.HardTimeout)))
	}
	if m := formatMatch(&f.Match, n); m != "" {
		b.WriteString(",")
		b.WriteString(m)
	}
	b.WriteString(" actions=")
	b.WriteString(formatActions(f.Actions, n))
	return b.String()
}

// FormatFlowKey renders what identifies a flow for strict modify and delete: table, priority and
// match.
func FormatFlowKey(f *Flow) string {
	m := FormatMatch(&f.Match)
	s := "table=" + strconv.Itoa(int(f.Table)) + ",priority=" + strconv.Itoa(int(f.Priority))
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
func FormatMatch(m *Match) string { return formatMatch(m, nil) }

// FormatMatchNamed is FormatMatch with n's table and register names (for display).
func FormatMatchNamed(m *Match, n *Names) string { return formatMatch(m, n) }

func formatMatch(m *Match, n *Names) string {
	var p joiner
	if m.PktMark != nil {
		p.add("pkt_mark=" + formatMasked32(*m.PktMark))
	}
	if m.CtState != nil && *m.CtState != (CtState{}) {
		p.add("ct_state=" + FormatCtState(*m.CtState))
	}
	if m.CtMark != nil {
		p.add("ct_mark=" + formatMasked32(*m.CtMark))
	}
	// rawProto is set when the IP protocol has no shorthand and OVS spells it "nw_proto=N"
	// after the addresses.
	rawProto := false
	switch proto := protocolKeyword(m.EthType, m.IPProto); {
	case proto != "":
		p.add(proto)
	case m.EthType == EthTypeIP || m.EthType == EthTypeIPv6:
		p.add(protocolKeyword(m.EthType, ProtoAny))
		rawProto = m.IPProto != ProtoAny
	case m.EthType != EthTypeAny:
		p.add(fmt.Sprintf("dl_type=0x%04x", uint16(m.EthType)))
		rawProto = m.IPProto != ProtoAny
	default:
		rawProto = m.IPProto != ProtoAny
	}
	for _, r := range m.Regs {
		for _, tok := range n.regMatch(r) {
			p.add(tok)
		}
	}
	x := m.Ext()
	for _, r := range x.XXRegs {
		p.add("xxreg" + strconv.Itoa(int(r.XXReg)) + "=" + formatMasked128(r.Value, r.Mask))
	}
	if m.InPort != 0 {
		p.add("in_port=" + formatPort(m.InPort))
	}
	if len(x.EthSrc) != 0 {
		p.add("dl_src=" + x.EthSrc.String())
	}
	if len(x.EthDst) != 0 {
		p.add("dl_dst=" + x.EthDst.String())
	}
	srcKey, dstKey := "nw_src", "nw_dst"
	if m.EthType == EthTypeIPv6 {
		srcKey, dstKey = "ipv6_src", "ipv6_dst"
	}
	// OVS prints prefixes with the host bits cleared and leaves out a /0 prefix entirely.
	if m.Src.IsValid() && m.Src.Bits() > 0 {
		src := m.Src.Masked()
		p.add(srcKey + "=" + formatPrefix(src.Addr().String(), src.Bits(), src.Addr().BitLen()))
	}
	if m.Dst.IsValid() && m.Dst.Bits() > 0 {
		dst := m.Dst.Masked()
		p.add(dstKey + "=" + formatPrefix(dst.Addr().String(), dst.Bits(), dst.Addr().BitLen()))
	}
	if x.ARPSPA.IsValid() {
		p.add("arp_spa=" + x.ARPSPA.String())
	}
	if x.ARPTPA.IsValid() {
		p.add("arp_tpa=" + x.ARPTPA.String())
	}
	if x.ARPOp != 0 {
		p.add("arp_op=" + strconv.Itoa(int(x.ARPOp)))
	}
	if len(x.ARPSHA) != 0 {
		p.add("arp_sha=" + x.ARPSHA.String())
	}
	if rawProto {
		p.add("nw_proto=" + strconv.Itoa(int(m.IPProto)))
	}
	if x.ICMPType != nil {
		p.add("icmp_type=" + strconv.Itoa(int(*x.ICMPType)))
	}
	if x.ICMPCode != nil {
		p.add("icmp_code=" + strconv.Itoa(int(*x.ICMPCode)))
	}
	if x.NDTarget.IsValid() {
		p.add("nd_target=" + x.NDTarget.String())
	}
	if len(x.NDSLL) != 0 {
		p.add("nd_sll=" + x.NDSLL.String())
	}
	if len(x.NDTLL) != 0 {
		p.add("nd_tll=" + x.NDTLL.String())
	}
	if v, mask := m.TpSrcMasked(); mask == 0xffff {
		p.add("tp_src=" + strconv.Itoa(int(v)))
	} else if mask != 0 {
		// OVS prints a masked transport port in hex.
		p.add("tp_src=0x" + strconv.FormatUint(uint64(v), 16) + "/0x" + strconv.FormatUint(uint64(mask), 16))
	}
	if m.TpDst != 0 {
		p.add("tp_dst=" + strconv.Itoa(int(m.TpDst)))
	}
	if x.TCPFlags != nil && *x.TCPFlags != (TCPFlags{}) {
		p.add("tcp_flags=" + formatTCPFlags(*x.TCPFlags))
	}
	return p.String()
}

// joiner builds a comma-separated list without an intermediate slice.
type joiner struct {
	b strings.Builder
	n int
}

func (j *joiner) add(s string) {
	if j.n > 0 {
		j.b.WriteByte(',')
	}
	j.n++
	j.b.WriteString(s)
}

func (j *joiner) String() string { return j.b.String() }

// formatPort renders a port number, using OVS's name for the LOCAL port.
func formatPort(p uint32) string {
	if p == PortLocal {
		return "LOCAL"
	}
	return strconv.FormatUint(uint64(p), 10)
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

// cHex renders v the way C's "%#x" does, which is how OVS prints hex values: "0" for zero,
// "0x1f" otherwise.
func cHex(v uint64) string {
	if v == 0 {
		return "0"
	}
	return "0x" + strconv.FormatUint(v, 16)
}

// formatMasked32 renders value/mask as OVS does: the value is printed with the mask applied,
// and an exact mask is left out.
func formatMasked32(m Masked32) string {
	if m.Mask == 0 || m.Mask == ^uint32(0) {
		return cHex(uint64(m.Value))
	}
	return cHex(uint64(m.Value&m.Mask)) + "/" + cHex(uint64(m.Mask))
}

func formatUint128(v Uint128) string {
	if v.Hi == 0 {
		return cHex(v.Lo)
	}
	return fmt.Sprintf("%#x%016x", v.Hi, v.Lo)
}

func formatMasked128(v, m Uint128) string {
	if m == (Uint128{}) || m == (Uint128{^uint64(0), ^uint64(0)}) {
		return formatUint128(v)
	}
	return formatUint128(Uint128{v.Hi & m.Hi, v.Lo & m.Lo}) + "/" + formatUint128(m)
}

// flagName is OVS's name of one bit of a flags field (ct_state, tcp_flags).
type flagName[F ~uint8 | ~uint16 | ~uint32] struct {
	flag F
	name string
}

// formatSignedFlags renders the flags of set as "+name" and those of unset as "-name", in the
// order of names ("+new-est+trk").
func formatSignedFlags[F ~uint8 | ~uint16 | ~uint32](set, unset F, names []flagName[F]) string {
	var b strings.Builder
	for _, n := range names {
		switch {
		case set&n.flag != 0:
			b.WriteString("+" + n.name)
		case unset&n.flag != 0:
			b.WriteString("-" + n.name)
		}
	}
	return b.String()
}

// tcpFlagNames are OVS's names of the TCP flags, in the order it prints them.
var tcpFlagNames = []flagName[TCPFlag]{
	{TCPFin, "fin"}, {TCPSyn, "syn"}, {TCPRst, "rst"}, {TCPPsh, "psh"}, {TCPAck, "ack"},
	{TCPUrg, "urg"}, {TCPEce, "ece"}, {TCPCwr, "cwr"}, {TCPNs, "ns"},
}

// formatTCPFlags renders a tcp_flags match as OVS prints it ("+syn-ack").
func formatTCPFlags(f TCPFlags) string { return formatSignedFlags(f.Set, f.Unset, tcpFlagNames) }

var ctStateNames = []flagName[CtStateFlags]{
	{CtNew, "new"}, {CtEst, "est"}, {CtRel, "rel"}, {CtRpl, "rpl"},
	{CtInv, "inv"}, {CtTrk, "trk"}, {CtSNAT, "snat"}, {CtDNAT, "dnat"},
}

// FormatCtState renders conntrack state flags in OVS's bit order, e.g. "+new-est+trk". Like
// OVS, it prints a state that specifies every flag as the set flags joined by "|"
// ("new|trk|snat|dnat"), or "0" when every flag must be clear.
func FormatCtState(s CtState) string {
	var all CtStateFlags
	for _, n := range ctStateNames {
		all |= n.flag
	}
	if (s.Set|s.Unset)&all == all && s.Set&s.Unset == 0 {
		if s.Set == 0 {
			return "0"
		}
		var names []string
		for _, n := range ctStateNames {
			if s.Set&n.flag != 0 {
				names = append(names, n.name)
			}
		}
		return strings.Join(names, "|")
	}
	return formatSignedFlags(s.Set, s.Unset, ctStateNames)
}

// FormatActions renders an action list; an empty list renders as "drop".
func FormatActions(actions []Action) string { return formatActions(actions, nil) }

// FormatActionsNamed is FormatActions with n's table and register names (for display).
func FormatActionsNamed(actions []Action, n *Names) string { return formatActions(actions, n) }

func formatActions(actions []Action, n *Names) string {
	if len(actions) == 0 {
		return "drop"
	}
	var p joiner
	for _, a := range actions {
		p.add(formatAction(a, n))
	}
	return p.String()
}

// FormatAction renders one action.
func FormatAction(a Action) string { return formatAction(a, nil) }

func formatAction(a Action, n *Names) string {
	switch a := a.(type) {
	case CT:
		return formatCT(a, n)
	case GroupAction:
		return "group:" + strconv.FormatUint(uint64(a.ID), 10)
	case GotoTable:
		return "goto_table:" + n.table(a.Table)
	case Resubmit:
		return "resubmit(," + n.table(a.Table) + ")"
	case SetReg:
		return n.setReg(a)
	case SetCtMark:
		return fmt.Sprintf("set_field:%s->ct_mark", formatMasked32(Masked32(a)))
	case SetEthDst:
		return "set_field:" + a.MAC.String() + "->eth_dst"
	case SetEthSrc:
		return "set_field:" + a.MAC.String() + "->eth_src"
	case Move:
		return "move:" + FormatSubfield(a.Src) + "->" + FormatSubfield(a.Dst)
	case Learn:
		return formatLearn(a, n)
	case Output:
		if a.Port == PortLocal {
			return "LOCAL"
		}
		return fmt.Sprintf("output:%d", a.Port)
	case OutputInPort:
		return "IN_PORT"
	case Normal:
		return "NORMAL"
	case Drop:
		return "drop"
	case Controller:
		return formatController(a)
	case MeterAction:
		return "meter:" + strconv.FormatUint(uint64(a.ID), 10)
	}
	panic(fmt.Sprintf("openflow: unknown action type %T", a))
}

func formatCT(a CT, n *Names) string {
	var p []string
	if a.Commit {
		p = append(p, "commit")
	}
	if a.HasTable {
		p = append(p, "table="+n.table(a.Table))
	}
	if a.Zone != 0 {
		p = append(p, fmt.Sprintf("zone=%d", a.Zone))
	}
	if a.NAT != nil {
		p = append(p, formatNAT(*a.NAT))
	}
	if len(a.Exec) > 0 {
		ex := make([]string, 0, len(a.Exec))
		for _, e := range a.Exec {
			ex = append(ex, formatAction(e, n))
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
	if n.keepsAddress() {
		return "nat(" + kind + ")"
	}
	// OVS brackets an IPv6 address only when a port follows it.
	addr := n.Addr.String()
	if n.Port != 0 {
		if n.Addr.Is6() {
			addr = "[" + addr + "]"
		}
		addr += ":" + strconv.Itoa(int(n.Port))
		if n.PortMax > n.Port {
			addr += "-" + strconv.Itoa(int(n.PortMax))
		}
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

func formatLearn(l Learn, n *Names) string {
	p := []string{"table=" + n.table(l.Table)}
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
	if l.Priority != defaultPriority {
		p = append(p, fmt.Sprintf("priority=%d", l.Priority))
	}
	if l.DeleteLearned {
		p = append(p, "delete_learned")
	}
	if l.Cookie != 0 {
		p = append(p, fmt.Sprintf("cookie=%#x", l.Cookie))
	}
	if l.Limit != 0 {
		p = append(p, fmt.Sprintf("limit=%d", l.Limit))
	}
	if l.ResultDst.Field != "" {
		p = append(p, "result_dst="+FormatSubfield(l.ResultDst))
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
			dst := FormatSubfield(s.Dst)
			if src := FormatSubfield(s.Src); s.Src.Field == "" || src == dst {
				p = append(p, dst)
			} else {
				p = append(p, dst+"="+src)
			}
		case LearnMatchValue:
			p = append(p, formatLearnMatchValue(s))
		case LearnLoad:
			p = append(p, "load:"+FormatSubfield(s.Src)+"->"+FormatSubfield(s.Dst))
		case LearnLoadValue:
			p = append(p, "load:"+cHex(s.Value)+"->"+FormatSubfield(s.Dst))
		}
	}
	return "learn(" + strings.Join(p, ",") + ")"
}

// formatController renders a controller action as OVS prints it: the short CONTROLLER:N form
// when only max_len is set, otherwise controller(...) without the default reason (action) and
// max_len (65535).
func formatController(c Controller) string {
	maxLen := c.MaxLen
	if maxLen == 0 {
		maxLen = 65535
	}
	defaultReason := c.Reason == "" || c.Reason == "action"
	if defaultReason && len(c.UserData) == 0 && !c.Pause {
		return fmt.Sprintf("CONTROLLER:%d", maxLen)
	}
	var p []string
	if !defaultReason {
		p = append(p, "reason="+c.Reason)
	}
	if maxLen != 65535 {
		p = append(p, fmt.Sprintf("max_len=%d", maxLen))
	}
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

// FormatBucket renders one bucket of a select group: "bucket=bucket_id:N,weight:W,actions=...".
// Like OVS, it leaves out the default select-group weight of 1.
func FormatBucket(b *Bucket) string {
	return formatBucket(b, GroupTypeSelect, nil)
}

// FormatBucketNamed renders one bucket of a select group like FormatBucket, with n's names.
func FormatBucketNamed(b *Bucket, n *Names) string {
	return formatBucket(b, GroupTypeSelect, n)
}

func formatBucket(b *Bucket, typ GroupType, n *Names) string {
	s := fmt.Sprintf("bucket=bucket_id:%d", b.ID)
	if b.Weight != defaultBucketWeight(typ) {
		s += fmt.Sprintf(",weight:%d", b.Weight)
	}
	return s + ",actions=" + formatActions(b.Actions, n)
}

// defaultBucketWeight is the weight OVS gives (and leaves out when printing) a bucket without
// an explicit weight: 1 in a select group, 0 otherwise.
func defaultBucketWeight(typ GroupType) uint16 {
	if typ == "" || typ == GroupTypeSelect {
		return 1
	}
	return 0
}

// FormatGroupHeader renders a group without its buckets.
func FormatGroupHeader(g *Group) string {
	typ := g.Type
	if typ == "" {
		typ = GroupTypeSelect
	}
	s := fmt.Sprintf("group_id=%d,type=%s", g.ID, typ)
	if typ == GroupTypeSelect {
		method := g.SelectionMethod
		if method == "" {
			method = "hash"
		}
		if method != "default" {
			s += ",selection_method=" + method
		}
		if g.SelectionParam != 0 {
			s += fmt.Sprintf(",selection_method_param=%d", g.SelectionParam)
		}
		switch len(g.HashFields) {
		case 0:
		case 1:
			s += ",fields=" + g.HashFields[0]
		default:
			s += ",fields(" + strings.Join(g.HashFields, ",") + ")"
		}
	}
	return s
}

// FormatGroup renders a whole group in ovs-ofctl's add-group syntax.
func FormatGroup(g *Group) string { return formatGroup(g, nil) }

// FormatGroupNamed renders a group like FormatGroup, with n's names in its buckets' actions;
// ParseGroupNamed reads it back.
func FormatGroupNamed(g *Group, n *Names) string { return formatGroup(g, n) }

func formatGroup(g *Group, n *Names) string {
	var b strings.Builder
	b.WriteString(FormatGroupHeader(g))
	typ := g.Type
	if typ == "" {
		typ = GroupTypeSelect
	}
	for i := range g.Buckets {
		b.WriteByte(',')
		b.WriteString(formatBucket(&g.Buckets[i], typ, n))
	}
	return b.String()
}
