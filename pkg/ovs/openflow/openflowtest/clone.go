package openflowtest

import (
	"cmp"
	"net/netip"
	"slices"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// The fake never shares memory with its callers: everything stored or handed out is a deep
// copy. nil and empty slices are kept apart so that copies compare equal with cmp.Diff.

func cloneSlice[T any](s []T) []T {
	if s == nil {
		return nil
	}
	out := make([]T, len(s))
	copy(out, s)
	return out
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func cloneFlow(f *openflow.Flow) openflow.Flow {
	out := *f
	out.Match = cloneMatch(&f.Match)
	out.Actions = cloneActions(f.Actions)
	return out
}

func cloneMatch(m *openflow.Match) openflow.Match {
	out := *m
	out.CtState = clonePtr(m.CtState)
	out.CtMark = clonePtr(m.CtMark)
	out.PktMark = clonePtr(m.PktMark)
	out.Regs = cloneSlice(m.Regs)
	if m.Extra != nil {
		x := *m.Extra
		x.EthSrc = cloneSlice(x.EthSrc)
		x.EthDst = cloneSlice(x.EthDst)
		x.ARPSHA = cloneSlice(x.ARPSHA)
		x.NDSLL = cloneSlice(x.NDSLL)
		x.NDTLL = cloneSlice(x.NDTLL)
		x.ICMPType = clonePtr(x.ICMPType)
		x.ICMPCode = clonePtr(x.ICMPCode)
		x.TCPFlags = clonePtr(x.TCPFlags)
		x.XXRegs = cloneSlice(x.XXRegs)
		out.Extra = &x
	}
	return out
}

func cloneActions(actions []openflow.Action) []openflow.Action {
	if actions == nil {
		return nil
	}
	out := make([]openflow.Action, len(actions))
	for i, a := range actions {
		out[i] = cloneAction(a)
	}
	return out
}

// cloneAction deep-copies the actions that hold references; the others are plain values.
func cloneAction(a openflow.Action) openflow.Action {
	switch a := a.(type) {
	case openflow.CT:
		a.NAT = clonePtr(a.NAT)
		a.Exec = cloneActions(a.Exec)
		return a
	case openflow.SetEthDst:
		a.MAC = cloneSlice(a.MAC)
		return a
	case openflow.SetEthSrc:
		a.MAC = cloneSlice(a.MAC)
		return a
	case openflow.Learn:
		a.Specs = cloneSlice(a.Specs)
		return a
	case openflow.Controller:
		a.UserData = cloneSlice(a.UserData)
		return a
	}
	return a
}

func cloneGroup(g *openflow.Group) openflow.Group {
	out := *g
	out.HashFields = cloneSlice(g.HashFields)
	if g.Buckets != nil {
		out.Buckets = make([]openflow.Bucket, len(g.Buckets))
		for i, b := range g.Buckets {
			b.Actions = cloneActions(b.Actions)
			out.Buckets[i] = b
		}
	}
	return out
}

func cloneOps(ops []openflow.Op) []openflow.Op {
	if ops == nil {
		return nil
	}
	out := make([]openflow.Op, len(ops))
	for i, op := range ops {
		if op.Flow != nil {
			f := cloneFlow(op.Flow)
			op.Flow = &f
		}
		if op.Group != nil {
			g := cloneGroup(op.Group)
			op.Group = &g
		}
		out[i] = op
	}
	return out
}

// normalizeMatch rewrites a (copied) match the way OVS stores it, so that matches OVS treats
// as the same flow get the same key: prefixes and masked values have the bits outside the mask
// cleared, a /0 prefix matches anything, all-ones masks become the zero (exact) mask, and
// registers are in register order.
func normalizeMatch(m *openflow.Match) {
	m.Src = normalizePrefix(m.Src)
	m.Dst = normalizePrefix(m.Dst)
	if m.CtState != nil && *m.CtState == (openflow.CtState{}) {
		m.CtState = nil // an empty ct_state match matches anything
	}
	if m.CtMark != nil {
		*m.CtMark = normalizeMasked32(*m.CtMark)
	}
	if m.PktMark != nil {
		*m.PktMark = normalizeMasked32(*m.PktMark)
	}
	for i, r := range m.Regs {
		v := normalizeMasked32(openflow.Masked32{Value: r.Value, Mask: r.Mask})
		m.Regs[i].Value, m.Regs[i].Mask = v.Value, v.Mask
	}
	slices.SortFunc(m.Regs, func(a, b openflow.RegMatch) int { return cmp.Compare(a.Reg, b.Reg) })
	allOnes := openflow.Uint128{Hi: ^uint64(0), Lo: ^uint64(0)}
	if m.Extra == nil {
		return
	}
	xx := m.Extra.XXRegs
	for i, r := range xx {
		if r.Mask == allOnes {
			r.Mask = openflow.Uint128{}
		}
		if r.Mask != (openflow.Uint128{}) {
			r.Value = openflow.Uint128{Hi: r.Value.Hi & r.Mask.Hi, Lo: r.Value.Lo & r.Mask.Lo}
		}
		xx[i] = r
	}
	slices.SortFunc(xx, func(a, b openflow.XXRegMatch) int { return cmp.Compare(a.XXReg, b.XXReg) })
}

func normalizeMasked32(v openflow.Masked32) openflow.Masked32 {
	if v.Mask == ^uint32(0) {
		v.Mask = 0
	}
	if v.Mask != 0 {
		v.Value &= v.Mask
	}
	return v
}

func normalizePrefix(p netip.Prefix) netip.Prefix {
	if !p.IsValid() || p.Bits() == 0 {
		return netip.Prefix{}
	}
	return p.Masked()
}
