package oftrace

import (
	"fmt"
	"net/netip"
	"slices"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// Tuple is one direction of a connection as conntrack keys it. ICMP echo connections have no
// ports.
type Tuple struct {
	Src, Dst         netip.Addr
	Proto            of.IPProto
	SrcPort, DstPort uint16
}

func (t Tuple) reverse() Tuple {
	return Tuple{Src: t.Dst, Dst: t.Src, Proto: t.Proto, SrcPort: t.DstPort, DstPort: t.SrcPort}
}

// String renders the tuple, e.g. "6 10.0.0.1:1234 -> 10.96.0.1:80".
func (t Tuple) String() string {
	if t.SrcPort == 0 && t.DstPort == 0 {
		return fmt.Sprintf("%d %s -> %s", t.Proto, t.Src, t.Dst)
	}
	return fmt.Sprintf("%d %s -> %s", t.Proto, netip.AddrPortFrom(t.Src, t.SrcPort), netip.AddrPortFrom(t.Dst, t.DstPort))
}

// Conn is one committed connection.
type Conn struct {
	Zone uint16
	// Orig is the tuple of the first packet as it was committed; Reply is the tuple replies are
	// expected with (NAT included).
	Orig, Reply Tuple
	Mark        uint32
	// SeenReply is set once a packet in the reply direction went through conntrack.
	SeenReply bool
}

type connKey struct {
	zone uint16
	t    Tuple
}

// Conntrack is a small model of a connection tracker, kept by the caller across traces so that
// later packets of a connection (and its replies) see what earlier ones committed. A ct action
// of a trace:
//
//   - looks the packet's tuple up in the action's zone, in both directions, unless an earlier
//     ct action of the trace associated the packet with a connection of that zone (the
//     datapath keeps that association, so a commit after NAT finds the NATed connection);
//   - sets ct_state: +trk always; +new for a packet of an unknown connection, and for packets in
//     the original direction of a committed connection until a reply was seen (as Linux and the
//     OVS userspace conntrack do); +est for replies and for original-direction packets once a
//     reply was seen; +rpl for replies; +inv (and nothing else) for ICMP messages that are not
//     echo requests or replies, which conntrack does not track (e.g. neighbour discovery);
//     +dnat/+snat when the action's nat rewrote the destination/source;
//   - loads ct_mark and ct_zone from the connection (0 for an unknown one);
//   - with commit, creates the connection (with nat(src=...)/nat(dst=...) recorded on its reply
//     tuple) and applies exec(set ct_mark);
//   - with nat on a known connection, applies its recorded NAT: forward in the original
//     direction, reversed for replies. nat on an unknown, uncommitted connection does nothing.
//
// Not modelled: TCP flags and states (the first packet of any TCP connection is +new, not
// +inv), timeouts, ICMP identifiers, ICMP errors as +rel (a trace of one is an error), port
// allocation on NAT collisions (an error), ct_label.
type Conntrack struct {
	// EstablishedBeforeReply reports original-direction packets of a committed non-TCP
	// connection as +est before any reply, instead of +new (Linux and the kernel datapath report
	// +new until a reply is seen; set it to model a conntrack that does not).
	EstablishedBeforeReply bool

	conns []*Conn
	index map[connKey]*Conn
}

// NewConntrack returns an empty connection tracker.
func NewConntrack() *Conntrack { return &Conntrack{index: map[connKey]*Conn{}} }

// Clone returns an independent copy.
func (c *Conntrack) Clone() *Conntrack {
	out := NewConntrack()
	out.EstablishedBeforeReply = c.EstablishedBeforeReply
	for _, conn := range c.conns {
		cp := *conn
		out.insert(&cp)
	}
	return out
}

// Conns returns copies of the connections, in commit order.
func (c *Conntrack) Conns() []Conn {
	out := make([]Conn, len(c.conns))
	for i, conn := range c.conns {
		out[i] = *conn
	}
	return out
}

// Lookup returns the connection of zone that t belongs to, and whether t is its reply direction.
func (c *Conntrack) Lookup(zone uint16, t Tuple) (Conn, bool, bool) {
	conn, reply := c.lookup(zone, t)
	if conn == nil {
		return Conn{}, false, false
	}
	return *conn, reply, true
}

func (c *Conntrack) lookup(zone uint16, t Tuple) (*Conn, bool) {
	conn := c.index[connKey{zone, t}]
	if conn == nil {
		return nil, false
	}
	return conn, conn.Reply == t && conn.Orig != t
}

func (c *Conntrack) insert(conn *Conn) {
	c.conns = append(c.conns, conn)
	c.index[connKey{conn.Zone, conn.Orig}] = conn
	c.index[connKey{conn.Zone, conn.Reply}] = conn
}

// Flush deletes the connections of zone whose original tuple matches orig and whose reply
// tuple matches reply (zero fields match anything), like `ovs-ofctl ct-flush`, and returns how
// many it deleted.
func (c *Conntrack) Flush(zone uint16, orig, reply of.CtTuple) int {
	n := 0
	c.conns = slices.DeleteFunc(c.conns, func(conn *Conn) bool {
		if conn.Zone != zone || !ctTupleMatches(orig, conn.Orig) || !ctTupleMatches(reply, conn.Reply) {
			return false
		}
		delete(c.index, connKey{zone, conn.Orig})
		delete(c.index, connKey{zone, conn.Reply})
		n++
		return true
	})
	return n
}

func ctTupleMatches(sel of.CtTuple, t Tuple) bool {
	return (!sel.Src.IsValid() || sel.Src == t.Src) && (!sel.Dst.IsValid() || sel.Dst == t.Dst) &&
		(sel.Proto == of.ProtoAny || sel.Proto == t.Proto) &&
		(sel.SrcPort == 0 || sel.SrcPort == t.SrcPort) && (sel.DstPort == 0 || sel.DstPort == t.DstPort)
}

// tupleOf returns the packet's tuple; ok is false for a packet conntrack marks invalid.
func tupleOf(p *Packet) (Tuple, bool, error) {
	t := Tuple{Src: p.Src, Dst: p.Dst, Proto: p.Proto}
	if p.hasPorts() {
		t.SrcPort, t.DstPort = p.SrcPort, p.DstPort
	}
	if !p.isICMP() {
		return t, true, nil
	}
	v6 := p.EthType == of.EthTypeIPv6
	switch {
	case !v6 && (p.ICMPType == 8 || p.ICMPType == 0), v6 && (p.ICMPType == 128 || p.ICMPType == 129):
		return t, true, nil
	case !v6 && (p.ICMPType == 3 || p.ICMPType == 11 || p.ICMPType == 12),
		v6 && p.ICMPType >= 1 && p.ICMPType <= 4:
		return t, false, fmt.Errorf("ct of ICMP error type %d (related to another connection): %w", p.ICMPType, ErrUnsupported)
	}
	return t, false, nil
}

// execute runs a ct action on the packet (headers and ct fields rewritten in place) and
// returns a one-line description.
func (c *Conntrack) execute(a of.CT, p *Packet) (string, error) {
	if !p.isIP() {
		return "", fmt.Errorf("ct on a non-IP packet (eth_type %#x): %w", uint16(p.EthType), ErrUnsupported)
	}
	cached := p.conn
	p.CtZone, p.CtMark, p.conn = a.Zone, 0, nil
	t, ok, err := tupleOf(p)
	if err != nil {
		return "", err
	}
	if !ok {
		p.CtState = of.CtTrk | of.CtInv
		return fmt.Sprintf("zone %d: untracked ICMP type %d: +inv+trk", a.Zone, p.ICMPType), nil
	}
	state := of.CtTrk
	conn, reply := c.lookup(a.Zone, t)
	if cached != nil && cached.Zone == a.Zone && c.index[connKey{a.Zone, cached.Orig}] == cached {
		conn, reply = cached, p.ctReply
	}
	what := "known"
	switch {
	case conn == nil && a.Commit:
		if conn, err = c.commitNew(a, t); err != nil {
			return "", err
		}
		state |= of.CtNew
		what = "committed new"
	case conn == nil:
		state |= of.CtNew
		what = "new"
	case reply:
		state |= of.CtEst | of.CtRpl
		conn.SeenReply = true
	case conn.SeenReply || (c.EstablishedBeforeReply && conn.Orig.Proto != of.ProtoTCP):
		state |= of.CtEst
	default:
		state |= of.CtNew
	}
	if conn != nil && a.Commit {
		for _, e := range a.Exec {
			if m, ok := e.(of.SetCtMark); ok {
				mask := m.Mask
				if mask == 0 {
					mask = ^uint32(0)
				}
				conn.Mark = conn.Mark&^mask | m.Value&mask
			}
		}
	}
	if conn != nil {
		p.CtMark = conn.Mark
		if a.NAT != nil {
			state |= applyNAT(conn, reply, p)
		}
	}
	p.CtState, p.conn, p.ctReply = state, conn, reply
	return fmt.Sprintf("zone %d: %s connection; packet now %v", a.Zone, what, *p), nil
}

// commitNew creates the connection of tuple t, with the action's NAT on its reply tuple. A NAT
// to a port range takes its first port (OVS starts from a hash of the tuple and takes the first
// free one).
func (c *Conntrack) commitNew(a of.CT, t Tuple) (*Conn, error) {
	conn := &Conn{Zone: a.Zone, Orig: t, Reply: t.reverse()}
	if n := a.NAT; n != nil && n.Kind != of.NATReply {
		if n.Addr.Is6() != t.Src.Is6() {
			return nil, fmt.Errorf("ct nat to %s on a packet of the other family", n.Addr)
		}
		hasPorts := t.SrcPort != 0 || t.DstPort != 0
		if n.Kind == of.NATDst {
			conn.Reply.Src = n.Addr
			if n.Port != 0 && hasPorts {
				conn.Reply.SrcPort = n.Port
			}
		} else {
			conn.Reply.Dst = n.Addr
			if n.Port != 0 && hasPorts {
				conn.Reply.DstPort = n.Port
			}
		}
	}
	if other := c.index[connKey{a.Zone, conn.Reply}]; other != nil {
		return nil, fmt.Errorf("zone %d: committing %v collides with the connection %v (port allocation: %w)", a.Zone, t, other.Orig, ErrUnsupported)
	}
	c.insert(conn)
	return conn, nil
}

// applyNAT rewrites the packet to the tuple the connection expects after NAT and returns the
// ct_state NAT bits for what it changed.
func applyNAT(conn *Conn, reply bool, p *Packet) of.CtStateFlags {
	want := conn.Reply.reverse() // original direction: what the packet becomes
	if reply {
		want = conn.Orig.reverse()
	}
	var flags of.CtStateFlags
	if want.Dst != p.Dst || (p.hasPorts() && want.DstPort != p.DstPort) {
		flags |= of.CtDNAT
	}
	if want.Src != p.Src || (p.hasPorts() && want.SrcPort != p.SrcPort) {
		flags |= of.CtSNAT
	}
	p.Src, p.Dst = want.Src, want.Dst
	if p.hasPorts() {
		p.SrcPort, p.DstPort = want.SrcPort, want.DstPort
	}
	return flags
}
