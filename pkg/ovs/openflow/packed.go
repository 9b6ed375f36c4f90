package openflow

import (
	"net/netip"
	"reflect"
	"slices"
)

// PackedGroup is a Group as a long-lived state keeps it. A Service's select group, whose every
// bucket is one ct action that NATs to one endpoint, is kept as its header, the one ct action
// without its NAT, and each bucket's address and port: about 20 bytes a bucket instead of 128
// (the bucket, its action list, the boxed ct action and its NAT). At 30,000 Services of 10
// endpoints that is 33 MB of an agent's heap at rest. Any other group is kept as it is.
//
// Group gives the group back: for a packed one a new Group equal to the one packed
// (reflect.DeepEqual), so it renders and encodes the same. The zero PackedGroup holds no group.
type PackedGroup struct {
	full *Group
	dnat *dnatGroup
}

// dnatGroup is a packed select group: bucket i has ID i, weight, and the one action ct with
// NAT{Kind: kind, Addr, Port} of targets[i].
type dnatGroup struct {
	hdr     Group // ID, type, selection method and hash fields; no buckets
	ct      CT    // every bucket's ct action, NAT nil
	weight  uint16
	kind    NATKind
	targets []natTarget
}

// natTarget is a bucket's NAT address and port in 20 bytes (a netip.Addr alone is 24).
type natTarget struct {
	addr [16]byte
	port uint16
	v4   bool
}

func newNATTarget(n *NAT) natTarget {
	return natTarget{addr: n.Addr.As16(), port: n.Port, v4: n.Addr.Is4()}
}

func (t natTarget) nat(kind NATKind) NAT {
	a := netip.AddrFrom16(t.addr)
	if t.v4 {
		a = a.Unmap()
	}
	return NAT{Kind: kind, Addr: a, Port: t.port}
}

// PackGroup returns g packed. g is kept (not copied) when it is not of the packed shape: the
// caller does not modify it afterwards.
func PackGroup(g *Group) PackedGroup {
	if d := packDNAT(g); d != nil {
		return PackedGroup{dnat: d}
	}
	return PackedGroup{full: g}
}

// packDNAT returns g packed, nil when some bucket is not of the packed shape.
func packDNAT(g *Group) *dnatGroup {
	if len(g.Buckets) == 0 {
		return nil
	}
	first, ok := dnatBucket(g.Buckets, 0)
	if !ok {
		return nil
	}
	d := &dnatGroup{hdr: *g, ct: first, weight: g.Buckets[0].Weight, kind: first.NAT.Kind,
		targets: make([]natTarget, len(g.Buckets))}
	d.hdr.Buckets, d.ct.NAT = nil, nil
	for i := range g.Buckets {
		ct, ok := dnatBucket(g.Buckets, i)
		if !ok || !d.sameBucket(&g.Buckets[i], ct) {
			return nil
		}
		d.targets[i] = newNATTarget(ct.NAT)
	}
	return d
}

// dnatBucket returns bucket i's ct action when the bucket is of the packed shape: ID i, one ct
// action whose NAT has a zoneless address and no port range.
func dnatBucket(bs []Bucket, i int) (CT, bool) {
	b := &bs[i]
	if b.ID != uint32(i) || len(b.Actions) != 1 {
		return CT{}, false
	}
	ct, ok := b.Actions[0].(CT)
	if !ok || ct.NAT == nil || ct.NAT.PortMax != 0 || !ct.NAT.Addr.IsValid() || ct.NAT.Addr.Zone() != "" {
		return CT{}, false
	}
	return ct, true
}

// sameBucket reports whether bucket b, whose action is ct, has d's weight and ct action (but
// for its NAT's address and port).
func (d *dnatGroup) sameBucket(b *Bucket, ct CT) bool {
	return b.Weight == d.weight && ct.NAT.Kind == d.kind && ct.Commit == d.ct.Commit && ct.Zone == d.ct.Zone &&
		ct.Table == d.ct.Table && ct.HasTable == d.ct.HasTable && sameActions(ct.Exec, d.ct.Exec)
}

// sameActions reports whether a and b are equal action lists: the same list (a group's buckets
// share theirs), or deeply equal.
func sameActions(a, b []Action) bool {
	if len(a) != len(b) || (a == nil) != (b == nil) {
		return false
	}
	return len(a) == 0 || &a[0] == &b[0] || reflect.DeepEqual(a, b)
}

// ID returns the group's ID.
func (p PackedGroup) ID() uint32 {
	if p.dnat != nil {
		return p.dnat.hdr.ID
	}
	return p.full.ID
}

// Len returns the group's number of buckets.
func (p PackedGroup) Len() int {
	if p.dnat != nil {
		return len(p.dnat.targets)
	}
	return len(p.full.Buckets)
}

// Group returns the group: the one kept, or a new one equal to the one packed, whose buckets
// share one action list, one NAT array and one exec list as the pipeline builds them.
func (p PackedGroup) Group() *Group {
	if p.dnat == nil {
		return p.full
	}
	d := p.dnat
	g := d.hdr
	n := len(d.targets)
	g.Buckets = make([]Bucket, n)
	nats, acts := make([]NAT, n), make([]Action, n)
	for i, t := range d.targets {
		nats[i] = t.nat(d.kind)
		ct := d.ct
		ct.NAT = &nats[i]
		acts[i] = ct
		g.Buckets[i] = Bucket{ID: uint32(i), Weight: d.weight, Actions: acts[i : i+1 : i+1]}
	}
	return &g
}

// Same reports whether g is the group p holds: equal to it, or rendering as it does
// (FormatGroup).
func (p PackedGroup) Same(g *Group) bool {
	switch {
	case p.full != nil && p.full == g:
		return true
	case p.dnat != nil && p.dnat.equal(g):
		return true
	}
	return FormatGroup(p.Group()) == FormatGroup(g)
}

// equal reports whether g is equal to the group d was packed from, without unpacking it.
func (d *dnatGroup) equal(g *Group) bool {
	h := &d.hdr
	if g.ID != h.ID || g.Type != h.Type || g.SelectionMethod != h.SelectionMethod ||
		g.SelectionParam != h.SelectionParam || !slices.Equal(g.HashFields, h.HashFields) ||
		(g.HashFields == nil) != (h.HashFields == nil) || len(g.Buckets) != len(d.targets) {
		return false
	}
	for i := range g.Buckets {
		ct, ok := dnatBucket(g.Buckets, i)
		if !ok || !d.sameBucket(&g.Buckets[i], ct) || newNATTarget(ct.NAT) != d.targets[i] {
			return false
		}
	}
	return true
}
