package oftrace

import (
	"fmt"
	"net/netip"
	"strings"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// learnedFlow builds the flow a learn action installs for the packet. Match specs may name IP
// addresses (whole or a leading prefix), L4 ports, MACs, in_port, pkt_mark and registers; load
// specs may load registers, xxregs and MACs.
func learnedFlow(l of.Learn, p *Packet) (of.Flow, error) {
	f := of.Flow{Table: l.Table, Priority: l.Priority, Cookie: l.Cookie, IdleTimeout: l.IdleTimeout,
		HardTimeout: l.HardTimeout, Match: of.Match{EthType: l.EthType, IPProto: l.IPProto}}
	for _, s := range l.Specs {
		dst, err := resolve(s.Dst)
		if err != nil {
			return of.Flow{}, err
		}
		v := u128{lo: s.Value}
		switch s.Kind {
		case of.LearnMatch, of.LearnLoad:
			src := dst
			if s.Src.Field != "" {
				if src, err = resolve(s.Src); err != nil {
					return of.Flow{}, err
				}
			}
			if src.n != dst.n {
				return of.Flow{}, fmt.Errorf("learn: %s and %s differ in width", src, dst)
			}
			if v, err = src.read(p); err != nil {
				return of.Flow{}, err
			}
		}
		switch s.Kind {
		case of.LearnMatch, of.LearnMatchValue:
			err = learnMatch(&f.Match, dst, v)
		case of.LearnLoad, of.LearnLoadValue:
			err = learnLoad(&f, dst, v)
		default:
			err = fmt.Errorf("learn spec kind %d: %w", s.Kind, ErrUnsupported)
		}
		if err != nil {
			return of.Flow{}, fmt.Errorf("learn: %w", err)
		}
	}
	return f, nil
}

// learnMatch adds "dst == v" to m.
func learnMatch(m *of.Match, dst subfield, v u128) error {
	whole := dst.start == 0 && dst.n == dst.f.bits
	switch dst.f.name {
	case "NXM_OF_IP_SRC", "NXM_OF_IP_DST", "NXM_NX_IPV6_SRC", "NXM_NX_IPV6_DST":
		if dst.start+dst.n != dst.f.bits {
			return fmt.Errorf("matching %s: only a leading prefix of an address: %w", dst, ErrUnsupported)
		}
		pfx := netip.PrefixFrom(u128ToAddr(v.shl(dst.start), dst.f.bits), int(dst.n))
		if dst.f.name == "NXM_OF_IP_SRC" || dst.f.name == "NXM_NX_IPV6_SRC" {
			m.Src = pfx
		} else {
			m.Dst = pfx
		}
		return nil
	case "NXM_NX_PKT_MARK":
		m.PktMark = &of.Masked32{Value: uint32(v.shl(dst.start).lo), Mask: uint32(ones(dst.n).shl(dst.start).lo)}
		return nil
	}
	if isReg(dst) {
		for _, w := range regWords(dst, v) {
			m.Regs = append(m.Regs, of.RegMatch{Reg: w.reg, Value: w.value, Mask: w.mask})
		}
		return nil
	}
	if !whole {
		return fmt.Errorf("matching part of %s: %w", dst, ErrUnsupported)
	}
	switch dst.f.name {
	case "NXM_OF_TCP_SRC", "NXM_OF_UDP_SRC", "OXM_OF_SCTP_SRC", "NXM_OF_TCP_DST", "NXM_OF_UDP_DST", "OXM_OF_SCTP_DST":
		if v.lo == 0 {
			return fmt.Errorf("matching %s == 0: the model cannot express it: %w", dst, ErrUnsupported)
		}
		if strings.HasSuffix(dst.f.name, "_SRC") {
			m.TpSrc = uint16(v.lo)
		} else {
			m.TpDst = uint16(v.lo)
		}
	case "NXM_OF_ETH_SRC":
		m.SetExtra(func(x *of.MatchExtra) { x.EthSrc = u128ToMAC(v) })
	case "NXM_OF_ETH_DST":
		m.SetExtra(func(x *of.MatchExtra) { x.EthDst = u128ToMAC(v) })
	case "NXM_OF_IN_PORT":
		m.InPort = uint32(v.lo)
	default:
		return fmt.Errorf("matching %s: %w", dst, ErrUnsupported)
	}
	return nil
}

// learnLoad adds "load v -> dst" to the flow's actions.
func learnLoad(f *of.Flow, dst subfield, v u128) error {
	whole := dst.start == 0 && dst.n == dst.f.bits
	switch {
	case isReg(dst):
		for _, w := range regWords(dst, v) {
			f.Actions = append(f.Actions, of.SetReg{Reg: w.reg, Value: w.value, Mask: w.mask})
		}
	case whole && dst.f.name == "NXM_OF_ETH_SRC":
		f.Actions = append(f.Actions, of.SetEthSrc{MAC: u128ToMAC(v)})
	case whole && dst.f.name == "NXM_OF_ETH_DST":
		f.Actions = append(f.Actions, of.SetEthDst{MAC: u128ToMAC(v)})
	default:
		return fmt.Errorf("loading %s: %w", dst, ErrUnsupported)
	}
	return nil
}

// isReg reports whether the subfield is (part of) a register or xxregister.
func isReg(s subfield) bool {
	return strings.HasPrefix(s.f.name, "NXM_NX_REG") || strings.HasPrefix(s.f.name, "NXM_NX_XXREG")
}

type regWord struct {
	reg         uint8
	value, mask uint32
}

// regWords splits a value for a reg or xxreg subfield into per-register value/mask pairs
// (mask all ones for a whole register, as the model's exact match and whole load).
func regWords(dst subfield, v u128) []regWord {
	var p Packet
	mask := ones(dst.n).shl(dst.start)
	dst.f.set(&p, v.shl(dst.start).and(mask))
	var m Packet
	dst.f.set(&m, mask)
	var out []regWord
	for r := 0; r < NumRegs; r++ {
		if m.Regs[r] == 0 {
			continue
		}
		w := regWord{reg: uint8(r), value: p.Regs[r], mask: m.Regs[r]}
		if w.mask == ^uint32(0) {
			w.mask = 0
		}
		out = append(out, w)
	}
	return out
}
