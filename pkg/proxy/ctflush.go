package proxy

import (
	"context"
	"net/netip"

	"k8s.io/klog/v2"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/model"
)

// conntrackFlusher is implemented by bridges that can delete conntrack entries (ofctl).
type conntrackFlusher interface {
	FlushConntrack(ctx context.Context, zone uint16, orig, reply of.CtTuple) error
}

// selected is what an owner's groups selected at its last sync.
type selected struct {
	udp, ipv6 bool
	endpoints map[netip.AddrPort]bool
}

// selectedOf returns what d's groups select; only UDP owners keep their endpoints (no other
// protocol owes a flush, and an owner's protocol never changes: it is part of its name).
func selectedOf(d desired) selected {
	s := selected{udp: d.port.Protocol == model.UDP, ipv6: d.ipv6}
	if s.udp {
		s.endpoints = endpointsOf(d.flows)
	}
	return s
}

// goneFlushes returns, for an owner that no longer exists, the UDP conntrack entries DNATed to
// its endpoints.
func goneFlushes(s selected) []udpFlush {
	if !s.udp {
		return nil
	}
	zone := pipeline.ZoneServiceV4
	if s.ipv6 {
		zone = pipeline.ZoneServiceV6
	}
	var out []udpFlush
	for ep := range s.endpoints {
		out = append(out, udpFlush{zone: zone, orig: of.CtTuple{Proto: of.ProtoUDP},
			reply: of.CtTuple{Src: ep.Addr(), SrcPort: ep.Port(), Proto: of.ProtoUDP}})
	}
	return out
}

// udpFlush is one conntrack deletion owed after a sync.
type udpFlush struct {
	zone        uint16
	orig, reply of.CtTuple
}

// endpointsOf returns the endpoints a port's groups select: from the DNAT of their buckets, or,
// with session affinity, of the port's endpoint DNAT flows.
func endpointsOf(f pipeline.ServicePortFlows) map[netip.AddrPort]bool {
	out := map[netip.AddrPort]bool{}
	add := func(actions []of.Action) {
		for _, a := range actions {
			if ct, ok := a.(of.CT); ok && ct.NAT != nil && ct.NAT.Kind == of.NATDst {
				out[netip.AddrPortFrom(ct.NAT.Addr, ct.NAT.Port)] = true
			}
		}
	}
	for _, g := range f.Groups {
		for i := range g.Buckets {
			add(g.Buckets[i].Actions)
		}
	}
	for _, fl := range f.EndpointFlows {
		add(fl.Actions)
	}
	return out
}

// serviceAddrs returns every destination a client may have used for a port: cluster IPs,
// ExternalIPs, programmed LB IPs (port) and NodePort addresses (nodePort).
func serviceAddrs(sp model.ServicePort, ipv6 bool, nodePortAddrs []netip.Addr) []netip.AddrPort {
	var out []netip.AddrPort
	add := func(a netip.Addr, port uint16) {
		if a.IsValid() && a.Is6() == ipv6 && port != 0 {
			out = append(out, netip.AddrPortFrom(a, port))
		}
	}
	for _, a := range sp.ClusterIPs {
		add(a, sp.Port)
	}
	for _, a := range sp.ExternalIPs {
		add(a, sp.Port)
	}
	for _, ing := range sp.LoadBalancerIngress {
		if ing.Decision.Program {
			add(ing.IP, sp.Port)
		}
	}
	for _, a := range nodePortAddrs {
		add(a, sp.NodePort)
	}
	return out
}

// udpFlushes returns the conntrack entries that went stale with this change of a UDP port:
// those DNATed to an endpoint that left, and, when the port gets its first endpoints, those of
// clients that tried it while it had none. TCP and SCTP connections end on their own.
func udpFlushes(d desired, before map[netip.AddrPort]bool, nodePortAddrs []netip.Addr) []udpFlush {
	if d.port.Protocol != model.UDP {
		return nil
	}
	after := endpointsOf(d.flows)
	gone := selected{udp: true, ipv6: d.ipv6, endpoints: map[netip.AddrPort]bool{}}
	for ep := range before {
		if !after[ep] {
			gone.endpoints[ep] = true
		}
	}
	out := goneFlushes(gone)
	zone := pipeline.ZoneServiceV4
	if d.ipv6 {
		zone = pipeline.ZoneServiceV6
	}
	if len(before) == 0 && len(after) > 0 {
		for _, a := range serviceAddrs(d.port, d.ipv6, nodePortAddrs) {
			out = append(out, udpFlush{zone: zone, orig: of.CtTuple{Dst: a.Addr(), DstPort: a.Port(), Proto: of.ProtoUDP}})
		}
	}
	return out
}

// flushConntrack runs the deletions; failures are logged, the flows are already right.
func (p *Proxier) flushConntrack(ctx context.Context, flushes []udpFlush) {
	f, ok := p.bridge.(conntrackFlusher)
	if !ok || len(flushes) == 0 {
		return
	}
	for _, fl := range flushes {
		if err := f.FlushConntrack(ctx, fl.zone, fl.orig, fl.reply); err != nil {
			klog.ErrorS(err, "Flushing stale UDP conntrack entries failed", "zone", fl.zone, "orig", fl.orig.String(), "reply", fl.reply.String())
		}
	}
}
