package proxy

import (
	"context"
	"maps"
	"net/netip"
	"slices"

	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/conntrack"
	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/observe"
)

// ConntrackTable is what the UDP conntrack reconciler needs of ovs-vswitchd's connection
// tracker (pkg/ovs/conntrack.Table): one zone's entries, and deleting one entry.
type ConntrackTable interface {
	Dump(ctx context.Context, zone uint16) ([]conntrack.Entry, error)
	Delete(ctx context.Context, e conntrack.Entry) error
}

// Reasons a UDP conntrack entry is stale (the reason label of the removal metric).
const (
	// StaleEndpointGone: the entry DNATs to an endpoint its Service port no longer selects.
	StaleEndpointGone = "EndpointGone"
	// StaleServiceGone: the entry DNATs a destination that is no UDP Service's frontend any
	// more (the Service, the port or the address went away).
	StaleServiceGone = "ServiceGone"
	// StaleNoEndpoints: the entry was committed, untranslated, while its Service port had no
	// endpoint; the port has endpoints now.
	StaleNoEndpoints = "NoEndpointsThen"
)

// selected is what an owner's groups selected at its last sync. For a UDP owner it keeps the
// port (the frontends its clients address) and the endpoints its groups DNAT to; no other
// protocol's entries are reconciled (TCP and SCTP connections end on their own), and an
// owner's protocol never changes: it is part of its name.
type selected struct {
	udp, ipv6 bool
	port      model.ServicePort
	endpoints map[netip.AddrPort]bool
}

// selectedOf returns what d's groups select.
func selectedOf(d desired) selected {
	s := selected{udp: d.port.Protocol == model.UDP, ipv6: d.ipv6}
	if s.udp {
		s.port, s.endpoints = d.port, endpointsOf(d.flows)
	}
	return s
}

// udpChanged reports whether committing d changes what a UDP owner serves: its endpoints or
// its frontends (had is false for an owner not committed before, e.g. every owner after a
// restart).
func udpChanged(before selected, had bool, d desired, nodePortAddrs []netip.Addr) bool {
	if d.port.Protocol != model.UDP {
		return false
	}
	if !had {
		return true
	}
	return !maps.Equal(before.endpoints, endpointsOf(d.flows)) ||
		!slices.Equal(serviceAddrs(before.port, before.ipv6, nodePortAddrs), serviceAddrs(d.port, d.ipv6, nodePortAddrs))
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

// frontend is one destination clients of a UDP Service port address, in its conntrack zone.
type frontend struct {
	zone uint16
	addr netip.AddrPort
}

func serviceZone(ipv6 bool) uint16 {
	if ipv6 {
		return pipeline.ZoneServiceV6
	}
	return pipeline.ZoneServiceV4
}

// udpServing maps every frontend of the committed UDP owners to the endpoints its groups
// select. Call it on the sync goroutine (it reads the committed state). NodePort frontends are
// the node's NodePort addresses (traffic that reaches OVS with its destination unchanged) and
// the NodePort virtual IPs (traffic from the host or from outside: the host DNATs it to the
// virtual IP of its family before it enters OVS).
func (p *Proxier) udpServing() map[frontend]map[netip.AddrPort]bool {
	out := map[frontend]map[netip.AddrPort]bool{}
	nodePorts := append(slices.Clone(p.nodePortAddrs), p.opts.NodePortVirtualIPs...)
	for _, s := range p.ownerEndpoints {
		if !s.udp {
			continue
		}
		for _, a := range serviceAddrs(s.port, s.ipv6, nodePorts) {
			fe := frontend{zone: serviceZone(s.ipv6), addr: a}
			if out[fe] == nil {
				out[fe] = map[netip.AddrPort]bool{}
			}
			maps.Copy(out[fe], s.endpoints)
		}
	}
	return out
}

// staleEntry is an entry to delete and why.
type staleEntry struct {
	entry  conntrack.Entry
	reason string
}

// staleUDP returns the UDP entries of the Service zones that no longer match what the
// Services serve, and nothing else: an entry whose DNAT target is still a serving endpoint of
// the port its client addressed stays, whatever else changed.
func staleUDP(entries []conntrack.Entry, serving map[frontend]map[netip.AddrPort]bool) []staleEntry {
	var out []staleEntry
	for _, e := range entries {
		if e.Proto != conntrack.ProtoUDP || (e.Zone != pipeline.ZoneServiceV4 && e.Zone != pipeline.ZoneServiceV6) {
			continue
		}
		target := netip.AddrPortFrom(e.Reply.Src, e.Reply.SrcPort)
		eps, known := serving[frontend{zone: e.Zone, addr: netip.AddrPortFrom(e.Orig.Dst, e.Orig.DstPort)}]
		switch {
		case eps[target]:
		case !known && e.DNATed():
			out = append(out, staleEntry{e, StaleServiceGone})
		case known && e.DNATed():
			out = append(out, staleEntry{e, StaleEndpointGone})
		case known && len(eps) > 0:
			out = append(out, staleEntry{e, StaleNoEndpoints})
		}
	}
	return out
}

// conntrackOwed reports whether a periodic run of the reconciler has anything to compare: a
// UDP owner is committed, or the last run failed somewhere. Without UDP owners no entry can go
// stale between syncs (a released owner's entries are reconciled by the sync that released it,
// and those of before a restart by the first sync), so an idle node lists nothing.
func (p *Proxier) conntrackOwed() bool {
	if p.ctFailed {
		return true
	}
	for _, s := range p.ownerEndpoints {
		if s.udp {
			return true
		}
	}
	return false
}

// reconcileConntrack deletes the stale UDP entries of the Service zones of the served
// families. It runs on the sync goroutine after a commit, so the committed state it compares
// with is the one the flows carry; failures are counted and retried by the next run.
func (p *Proxier) reconcileConntrack(ctx context.Context) observe.ConntrackResult {
	var res observe.ConntrackResult
	ct := p.opts.Conntrack
	if ct == nil {
		return res
	}
	serving := p.udpServing()
	fams := p.families()
	for _, ipv6 := range []bool{false, true} {
		if (ipv6 && !fams.IPv6) || (!ipv6 && !fams.IPv4) {
			continue
		}
		zone := serviceZone(ipv6)
		entries, err := ct.Dump(ctx, zone)
		if err != nil {
			// A dump with lines it did not understand still returns the ones it did.
			res.Failures++
			klog.ErrorS(err, "Listing conntrack entries failed", "zone", zone, "understood", len(entries))
		}
		for _, s := range staleUDP(entries, serving) {
			if err := ct.Delete(ctx, s.entry); err != nil {
				res.Failures++
				klog.ErrorS(err, "Deleting a stale UDP conntrack entry failed", "entry", s.entry.String(), "reason", s.reason)
				continue
			}
			if res.Removed == nil {
				res.Removed = map[string]int{}
			}
			res.Removed[s.reason]++
			klog.V(2).InfoS("Deleted a stale UDP conntrack entry", "entry", s.entry.String(), "reason", s.reason)
		}
	}
	p.ctFailed = res.Failures > 0
	return res
}
