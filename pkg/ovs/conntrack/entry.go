package conntrack

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Protocol numbers of the entries the package parses by name.
const (
	ProtoICMP   uint8 = 1
	ProtoTCP    uint8 = 6
	ProtoUDP    uint8 = 17
	ProtoICMPv6 uint8 = 58
	ProtoSCTP   uint8 = 132
)

// Tuple is one direction of a connection.
type Tuple struct {
	Src, Dst         netip.Addr
	SrcPort, DstPort uint16
}

// Entry is one connection of the tracker: its zone, protocol and both directions. For a
// connection that was DNATed, Reply.Src is the translated destination (the endpoint).
type Entry struct {
	Zone  uint16
	Proto uint8
	Orig  Tuple
	Reply Tuple
}

// DNATed reports whether the reply comes from somewhere else than where the original direction
// went: the connection's destination was translated.
func (e Entry) DNATed() bool {
	return e.Reply.Src != e.Orig.Dst || e.Reply.SrcPort != e.Orig.DstPort
}

// FlushArgs renders the entry for `dpctl/flush-conntrack`: "zone=Z" and the original
// direction's full 5-tuple, which names exactly this entry.
func (e Entry) FlushArgs() []string {
	src, dst, proto := "ct_nw_src", "ct_nw_dst", "ct_nw_proto"
	if e.Orig.Src.Is6() {
		src, dst, proto = "ct_ipv6_src", "ct_ipv6_dst", "ct_nw_proto"
	}
	t := []string{
		src + "=" + e.Orig.Src.String(),
		dst + "=" + e.Orig.Dst.String(),
		proto + "=" + strconv.Itoa(int(e.Proto)),
	}
	if e.Proto == ProtoTCP || e.Proto == ProtoUDP || e.Proto == ProtoSCTP {
		t = append(t, "ct_tp_src="+strconv.Itoa(int(e.Orig.SrcPort)), "ct_tp_dst="+strconv.Itoa(int(e.Orig.DstPort)))
	}
	return []string{"zone=" + strconv.Itoa(int(e.Zone)), strings.Join(t, ",")}
}

// String renders the entry like ovs-appctl does (without protocol state).
func (e Entry) String() string {
	return fmt.Sprintf("%s,orig=(%s),reply=(%s),zone=%d", protoName(e.Proto), e.Orig, e.Reply, e.Zone)
}

func (t Tuple) String() string {
	return fmt.Sprintf("src=%s,dst=%s,sport=%d,dport=%d", t.Src, t.Dst, t.SrcPort, t.DstPort)
}

var protoNames = map[string]uint8{"icmp": ProtoICMP, "tcp": ProtoTCP, "udp": ProtoUDP, "icmp6": ProtoICMPv6, "sctp": ProtoSCTP}

func protoName(p uint8) string {
	for n, v := range protoNames {
		if v == p {
			return n
		}
	}
	return strconv.Itoa(int(p))
}
