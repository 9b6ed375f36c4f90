package openflow

import (
	"net/netip"
	"strconv"
	"strings"
)

// CtTuple selects conntrack entries by (part of) one direction's 5-tuple; zero fields match
// anything. It renders in the syntax of `ovs-ofctl ct-flush`.
type CtTuple struct {
	Src, Dst         netip.Addr
	Proto            IPProto
	SrcPort, DstPort uint16
}

// String renders the tuple, e.g. "ct_nw_dst=10.96.0.10,ct_nw_proto=17,ct_tp_dst=53".
func (t CtTuple) String() string {
	var p []string
	addr := func(key string, a netip.Addr) {
		if !a.IsValid() {
			return
		}
		if a.Is6() {
			key = strings.Replace(key, "nw", "ipv6", 1)
		}
		p = append(p, key+"="+a.String())
	}
	addr("ct_nw_src", t.Src)
	addr("ct_nw_dst", t.Dst)
	if t.Proto != ProtoAny {
		p = append(p, "ct_nw_proto="+strconv.Itoa(int(t.Proto)))
	}
	if t.SrcPort != 0 {
		p = append(p, "ct_tp_src="+strconv.Itoa(int(t.SrcPort)))
	}
	if t.DstPort != 0 {
		p = append(p, "ct_tp_dst="+strconv.Itoa(int(t.DstPort)))
	}
	return strings.Join(p, ",")
}
