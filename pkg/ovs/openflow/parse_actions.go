package openflow

import (
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// parseActions parses the text after "actions=".
func parseActions(s string) ([]Action, error) {
	if s == "" {
		return nil, fmt.Errorf("empty action list")
	}
	return parseActionList(splitTopLevel(s))
}

func parseActionList(toks []string) ([]Action, error) {
	actions := make([]Action, 0, len(toks))
	for _, tok := range toks {
		a, err := parseAction(tok)
		if err != nil {
			return nil, err
		}
		actions = append(actions, a)
	}
	return actions, nil
}

// inner returns the text between "name(" and the final ")" of tok.
func inner(tok, name string) (string, bool) {
	if !strings.HasPrefix(tok, name+"(") || !strings.HasSuffix(tok, ")") {
		return "", false
	}
	return tok[len(name)+1 : len(tok)-1], true
}

func parseAction(tok string) (Action, error) {
	switch tok {
	case "drop":
		return Drop{}, nil
	case "IN_PORT", "in_port":
		return OutputInPort{}, nil
	case "NORMAL", "normal":
		return Normal{}, nil
	case "LOCAL", "local":
		return Output{Port: PortLocal}, nil
	}
	if body, ok := inner(tok, "ct"); ok {
		return parseCT(body, tok)
	}
	if body, ok := inner(tok, "learn"); ok {
		return parseLearn(body, tok)
	}
	if body, ok := inner(tok, "controller"); ok {
		return parseController(body, tok)
	}
	if body, ok := inner(tok, "resubmit"); ok {
		port, table, found := strings.Cut(body, ",")
		if !found || port != "" || strings.Contains(table, ",") {
			return nil, tokErr(tok, "only resubmit(,TABLE) is supported")
		}
		t, err := parseUint8(table)
		if err != nil {
			return nil, tokErr(tok, "%v", err)
		}
		return Resubmit{Table: t}, nil
	}
	name, arg, _ := strings.Cut(tok, ":")
	var a Action
	var err error
	switch name {
	case "output":
		var p uint32
		p, err = parsePort(arg)
		a = canonicalAction(Output{Port: p})
	case "CONTROLLER":
		var n uint16
		n, err = parseUint16(arg)
		a = Controller{MaxLen: n}
	case "meter":
		var id uint32
		id, err = parseUint32(arg)
		a = MeterAction{ID: id}
	case "group":
		var id uint32
		id, err = parseUint32(arg)
		a = GroupAction{ID: id}
	case "goto_table":
		var t uint8
		t, err = parseUint8(arg)
		a = GotoTable{Table: t}
	case "set_field":
		a, err = parseSetField(arg)
	case "load":
		a, err = parseLoad(arg)
	case "move":
		a, err = parseMove(arg)
	case "mod_dl_dst", "mod_dl_src":
		var mac net.HardwareAddr
		mac, err = parseMAC(arg)
		if name == "mod_dl_dst" {
			a = SetEthDst{MAC: mac}
		} else {
			a = SetEthSrc{MAC: mac}
		}
	default:
		if p, perr := strconv.ParseUint(tok, 10, 32); perr == nil {
			return Output{Port: uint32(p)}, nil // OpenFlow 1.0 bare port number
		}
		return nil, tokErr(tok, "unknown action")
	}
	if err != nil {
		return nil, tokErr(tok, "%v", err)
	}
	if controller, ok := a.(Controller); ok && controller.MaxLen == 65535 {
		controller.MaxLen = 0
		a = controller
	}
	return a, nil
}

// parseSetField parses "VALUE[/MASK]->FIELD" for the fields the model can set.
func parseSetField(arg string) (Action, error) {
	val, field, ok := strings.Cut(arg, "->")
	if !ok {
		return nil, fmt.Errorf("missing ->")
	}
	switch field {
	case "eth_dst", "dl_dst":
		mac, err := parseMAC(val)
		return SetEthDst{MAC: mac}, err
	case "eth_src", "dl_src":
		mac, err := parseMAC(val)
		return SetEthSrc{MAC: mac}, err
	case "ct_mark":
		v, err := parseMasked32(val)
		return SetCtMark(v), err
	}
	if n, ok := strings.CutPrefix(field, "reg"); ok {
		if r, err := strconv.ParseUint(n, 10, 8); err == nil && r <= 15 {
			v, err := parseMasked32(val)
			return SetReg{Reg: uint8(r), Value: v.Value, Mask: v.Mask}, err
		}
	}
	return nil, fmt.Errorf("set_field to %q is not supported", field)
}

// parseLoad parses "load:VALUE->SUBFIELD" into the equivalent set_field action, for the
// fields the model can set.
func parseLoad(arg string) (Action, error) {
	val, dstStr, ok := strings.Cut(arg, "->")
	if !ok {
		return nil, fmt.Errorf("missing ->")
	}
	v, err := parseUint(val, 64)
	if err != nil {
		return nil, err
	}
	dst, err := parseSubfield(dstStr)
	if err != nil {
		return nil, err
	}
	f, known := lookupField(dst.Field)
	if !known {
		return nil, fmt.Errorf("load to %q is not supported", dstStr)
	}
	start, end := dst.Start, dst.End
	if dst.Whole {
		start, end = 0, f.bits-1
	}
	width := end - start + 1
	if width < 64 && v>>width != 0 {
		return nil, fmt.Errorf("value %s does not fit in %s", val, dstStr)
	}
	switch {
	case f.kind == kindMAC && dst.Whole && (f.name == "eth_dst" || f.name == "eth_src"):
		mac := net.HardwareAddr{byte(v >> 40), byte(v >> 32), byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
		if f.name == "eth_dst" {
			return SetEthDst{MAC: mac}, nil
		}
		return SetEthSrc{MAC: mac}, nil
	case f.bits == 32 && (strings.HasPrefix(f.name, "reg") || f.name == "ct_mark"):
		mask := uint32((uint64(1)<<width - 1) << start)
		value, m := canonicalValueMask(uint32(v<<start), mask)
		if f.name == "ct_mark" {
			return SetCtMark{Value: value, Mask: m}, nil
		}
		r, _ := strconv.ParseUint(strings.TrimPrefix(f.name, "reg"), 10, 8)
		return SetReg{Reg: uint8(r), Value: value, Mask: m}, nil
	}
	return nil, fmt.Errorf("load to %q is not supported", dstStr)
}

func parseMove(arg string) (Action, error) {
	srcStr, dstStr, ok := strings.Cut(arg, "->")
	if !ok {
		return nil, fmt.Errorf("missing ->")
	}
	src, err := parseSubfield(srcStr)
	if err != nil {
		return nil, err
	}
	dst, err := parseSubfield(dstStr)
	if err != nil {
		return nil, err
	}
	return Move{Src: src, Dst: dst}, nil
}

// parseSubfield parses "FIELD[]", "FIELD[N]" or "FIELD[A..B]".
func parseSubfield(s string) (Subfield, error) {
	open := strings.IndexByte(s, '[')
	if open <= 0 || !strings.HasSuffix(s, "]") {
		return Subfield{}, fmt.Errorf("invalid subfield %q", s)
	}
	sf := Subfield{Field: s[:open]}
	rng := s[open+1 : len(s)-1]
	if rng == "" {
		sf.Whole = true
		return sf, nil
	}
	a, b, isRange := strings.Cut(rng, "..")
	if !isRange {
		b = a
	}
	start, err1 := strconv.ParseUint(a, 10, 16)
	end, err2 := strconv.ParseUint(b, 10, 16)
	if err1 != nil || err2 != nil || end < start {
		return Subfield{}, fmt.Errorf("invalid subfield range %q", s)
	}
	sf.Start, sf.End = uint16(start), uint16(end)
	return sf, nil
}

// parseCT parses the body of ct(...).
func parseCT(body, tok string) (Action, error) {
	var ct CT
	for _, t := range splitTopLevel(body) {
		key, val, _ := strings.Cut(t, "=")
		var err error
		switch {
		case t == "commit":
			ct.Commit = true
		case key == "table":
			ct.Table, err = parseUint8(val)
			ct.HasTable = true
		case key == "zone":
			ct.Zone, err = parseUint16(val)
		case t == "nat":
			ct.NAT = &NAT{Kind: NATReply}
		case strings.HasPrefix(t, "nat("):
			ct.NAT, err = parseNAT(t)
		case strings.HasPrefix(t, "exec("):
			body, _ := inner(t, "exec")
			var exec []Action
			if exec, err = parseActionList(splitTopLevel(body)); err == nil {
				ct.Exec = exec
			}
			if te, ok := err.(*tokenError); ok {
				return nil, tokErr(tok, "exec: %s: %s", te.token, te.reason)
			}
		default:
			return nil, tokErr(tok, "unsupported ct argument %q", t)
		}
		if err != nil {
			return nil, tokErr(tok, "%v", err)
		}
	}
	return ct, nil
}

// parseNAT parses "nat(src=ADDR[:PORT])" or "nat(dst=...)", with IPv6 addresses bracketed
// when a port follows, and "nat(src)" or "nat(dst)" without an address.
func parseNAT(t string) (*NAT, error) {
	body, ok := inner(t, "nat")
	if !ok {
		return nil, fmt.Errorf("invalid nat %q", t)
	}
	switch body {
	case "src":
		return &NAT{Kind: NATSrc}, nil
	case "dst":
		return &NAT{Kind: NATDst}, nil
	}
	kindStr, addrStr, ok := strings.Cut(body, "=")
	if !ok || strings.Contains(addrStr, ",") {
		return nil, fmt.Errorf("unsupported nat %q (only one address and port)", t)
	}
	n := &NAT{}
	switch kindStr {
	case "src":
		n.Kind = NATSrc
	case "dst":
		n.Kind = NATDst
	default:
		return nil, fmt.Errorf("unsupported nat %q", t)
	}
	portStr := ""
	if strings.HasPrefix(addrStr, "[") {
		end := strings.IndexByte(addrStr, ']')
		if end < 0 {
			return nil, fmt.Errorf("invalid nat address %q", addrStr)
		}
		rest := addrStr[end+1:]
		addrStr = addrStr[1:end]
		if rest != "" {
			p, ok := strings.CutPrefix(rest, ":")
			if !ok {
				return nil, fmt.Errorf("invalid nat address %q", t)
			}
			portStr = p
		}
	} else if strings.Count(addrStr, ":") == 1 {
		addrStr, portStr, _ = strings.Cut(addrStr, ":")
	}
	addr, err := netip.ParseAddr(addrStr)
	if err != nil {
		return nil, fmt.Errorf("invalid nat address %q", addrStr)
	}
	n.Addr = addr
	if portStr != "" {
		minStr, maxStr, isRange := strings.Cut(portStr, "-")
		if n.Port, err = parseUint16(minStr); err != nil {
			return nil, err
		}
		if isRange {
			if n.PortMax, err = parseUint16(maxStr); err != nil {
				return nil, err
			}
		}
	}
	return n, nil
}

// parseController parses the body of controller(...).
func parseController(body, tok string) (Action, error) {
	var c Controller
	for _, t := range splitTopLevel(body) {
		key, val, _ := strings.Cut(t, "=")
		var err error
		switch {
		case t == "pause":
			c.Pause = true
		case key == "reason":
			c.Reason = val
			if val == "action" {
				c.Reason = ""
			}
		case key == "max_len":
			c.MaxLen, err = parseUint16(val)
		case key == "userdata":
			c.UserData, err = hex.DecodeString(strings.ReplaceAll(val, ".", ""))
		case key == "id" && val == "0":
		default:
			return nil, tokErr(tok, "unsupported controller argument %q", t)
		}
		if err != nil {
			return nil, tokErr(tok, "%v", err)
		}
	}
	if c.MaxLen == 65535 {
		c.MaxLen = 0
	}
	return c, nil
}

// parseLearn parses the body of learn(...). Leading eth_type and nw_proto value specs become
// Learn.EthType and Learn.IPProto (OVS prints both the same way; see CanonicalFlow).
func parseLearn(body, tok string) (Action, error) {
	l := Learn{Priority: defaultPriority}
	leading := true
	for _, t := range splitTopLevel(body) {
		key, val, hasVal := strings.Cut(t, "=")
		var err error
		switch {
		case key == "table":
			l.Table, err = parseUint8(val)
		case key == "idle_timeout":
			l.IdleTimeout, err = parseUint16(val)
		case key == "hard_timeout":
			l.HardTimeout, err = parseUint16(val)
		case key == "fin_idle_timeout":
			l.FinIdleTimeout, err = parseUint16(val)
		case key == "fin_hard_timeout":
			l.FinHardTimeout, err = parseUint16(val)
		case key == "priority":
			l.Priority, err = parseUint16(val)
		case key == "cookie":
			l.Cookie, err = parseUint(val, 64)
		case key == "limit":
			l.Limit, err = parseUint32(val)
		case key == "result_dst":
			l.ResultDst, err = parseSubfield(val)
		case t == "delete_learned":
			l.DeleteLearned = true
		default:
			var spec LearnSpec
			spec, err = parseLearnSpec(t, key, val, hasVal)
			if err != nil {
				break
			}
			if leading && spec.Kind == LearnMatchValue && spec.Dst.Whole {
				if spec.Dst.Field == "NXM_OF_ETH_TYPE" && l.EthType == EthTypeAny && l.IPProto == ProtoAny {
					l.EthType = EthType(spec.Value)
					continue
				}
				if spec.Dst.Field == "NXM_OF_IP_PROTO" && l.IPProto == ProtoAny {
					l.IPProto = IPProto(spec.Value)
					continue
				}
			}
			leading = false
			l.Specs = append(l.Specs, spec)
		}
		if err != nil {
			return nil, tokErr(tok, "learn spec %q: %v", t, err)
		}
	}
	return l, nil
}

// parseLearnSpec parses one flow_mod_spec of a learn action:
//
//	load:SRC[]->DST[]        LearnLoad
//	load:VALUE->DST[]        LearnLoadValue
//	DST[]=SRC[]              LearnMatch
//	DST[]                    LearnMatch with Dst matched against itself
//	DST[]=VALUE              LearnMatchValue
//	field=typed-value        LearnMatchValue on a whole field, as OVS prints it (ip_dst=10.0.0.1)
func parseLearnSpec(t, key, val string, hasVal bool) (LearnSpec, error) {
	if rest, ok := strings.CutPrefix(t, "load:"); ok {
		srcStr, dstStr, ok := strings.Cut(rest, "->")
		if !ok {
			return LearnSpec{}, fmt.Errorf("missing ->")
		}
		dst, err := parseSubfield(dstStr)
		if err != nil {
			return LearnSpec{}, err
		}
		if strings.Contains(srcStr, "[") {
			src, err := parseSubfield(srcStr)
			return LearnSpec{Kind: LearnLoad, Src: src, Dst: dst}, err
		}
		v, err := parseUint(srcStr, 64)
		return LearnSpec{Kind: LearnLoadValue, Dst: dst, Value: v}, err
	}
	if !hasVal {
		dst, err := parseSubfield(t)
		return LearnSpec{Kind: LearnMatch, Dst: dst}, err
	}
	var dst Subfield
	var f fieldInfo
	if strings.Contains(key, "[") {
		var err error
		if dst, err = parseSubfield(key); err != nil {
			return LearnSpec{}, err
		}
		if known, ok := lookupField(dst.Field); ok && known.isWhole(dst) {
			f = known // a whole field takes its typed value: NXM_OF_IP_DST[]=10.0.0.1
		}
	} else {
		var ok bool
		if f, ok = lookupField(key); !ok {
			return LearnSpec{}, fmt.Errorf("unknown field %q", key)
		}
		dst = Subfield{Field: f.nxm, Whole: true}
	}
	if strings.Contains(val, "[") {
		src, err := parseSubfield(val)
		if err != nil {
			return LearnSpec{}, err
		}
		if src == dst {
			src = Subfield{}
		}
		return LearnSpec{Kind: LearnMatch, Src: src, Dst: dst}, nil
	}
	v, err := parseFieldValue(f, val)
	if err != nil {
		return LearnSpec{}, err
	}
	return LearnSpec{Kind: LearnMatchValue, Dst: dst, Value: v}, nil
}

// parseFieldValue parses an immediate value in the format OVS uses for field f (a number for
// an unknown field).
func parseFieldValue(f fieldInfo, s string) (uint64, error) {
	switch f.kind {
	case kindIPv4:
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is4() {
			return 0, fmt.Errorf("invalid IPv4 address %q", s)
		}
		b := a.As4()
		return uint64(b[0])<<24 | uint64(b[1])<<16 | uint64(b[2])<<8 | uint64(b[3]), nil
	case kindMAC:
		mac, err := parseMAC(s)
		if err != nil {
			return 0, err
		}
		var v uint64
		for _, b := range mac {
			v = v<<8 | uint64(b)
		}
		return v, nil
	case kindWide:
		return 0, fmt.Errorf("immediate values of %s are not supported", f.name)
	}
	return parseUint(s, 64)
}
