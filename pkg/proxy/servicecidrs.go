package proxy

import (
	"net/netip"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/tracker"
)

// SetServiceCIDRs sets the cluster's ServiceCIDRs (pkg/agent watches networking.k8s.io/v1
// ServiceCIDR): new connections to an address inside one that no Service port claims are
// dropped (pipeline.NodeConfig.ServiceCIDRs), and an ExternalIP or LB IP inside one is refused
// unless it is the Service's own ClusterIP. nil or empty: none known (today's behaviour
// without the API). A change rebuilds the node-level flows at the next sync.
func (p *Proxier) SetServiceCIDRs(cidrs []netip.Prefix) {
	norm := normalizePrefixes(cidrs)
	p.mu.Lock()
	if slices.Equal(norm, p.serviceCIDRs) {
		p.mu.Unlock()
		return
	}
	p.serviceCIDRs = norm
	p.cidrGen++
	p.nodeGen++
	p.baseDirty = true
	p.mu.Unlock()
	klog.InfoS("ServiceCIDRs changed", "cidrs", norm)
	p.runner.Request()
}

// ServiceCIDRs returns the ServiceCIDRs of the committed node-level flows (SetServiceCIDRs);
// nil before the first sync or when none is known. A change moves PortsGeneration.
func (p *Proxier) ServiceCIDRs() []netip.Prefix {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.committedCIDRs)
}

// normalizePrefixes returns the valid prefixes of in, masked, unmapped, sorted and once each.
func normalizePrefixes(in []netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	for _, c := range in {
		if !c.IsValid() {
			continue
		}
		if a := c.Addr(); a.Is4In6() && c.Bits() >= 96 {
			c = netip.PrefixFrom(a.Unmap(), c.Bits()-96)
		}
		out = append(out, c.Masked())
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	return slices.Compact(out)
}

// addrPolicy is the address policy of this sync: the options' and the sync's ServiceCIDRs.
func (p *Proxier) addrPolicy() model.AddrPolicy {
	return model.AddrPolicy{NodePortVirtualIPs: p.opts.NodePortVirtualIPs, ServiceVirtualIPs: p.opts.ServiceVirtualIPs,
		ServiceCIDRs: p.syncCIDRs, ExternalIPCIDRs: p.opts.ExternalIPCIDRs}
}

// noteAddrInputs brings the claims index and the skipped ClusterIPs up to date with the
// drained Service changes and this sync's ServiceCIDRs (on the sync goroutine, after
// p.svcs took the changes), marks dirty every Service whose outcome may have changed, and
// reports whether the node-level flows' inputs (the ServiceCIDRs, the exempted ClusterIPs)
// changed.
func (p *Proxier) noteAddrInputs(drained tracker.Drained, cidrs []netip.Prefix, cidrGen uint64) bool {
	base, all := false, false
	if cidrGen != p.syncCIDRGen {
		base, all = true, true
		p.syncCIDRs, p.syncCIDRGen = cidrs, cidrGen
		// The policy changed: every Service's claims and refusals may have.
		for nn, r := range p.svcs {
			if r.svc == nil {
				continue
			}
			p.reclaim(nn)
			if hasExternalAddrs(r.svc) {
				r.claimGen++
				p.dirty.Insert(nn)
			}
		}
	}
	for nn := range drained.ServiceChanges {
		if !all || p.service(nn) == nil { // all: the Services still there were reclaimed above
			p.reclaim(nn)
		}
		if p.noteExempt(nn) {
			base = true
		}
	}
	return base
}

// reclaim sets nn's claims from its current object (none when it is gone or skipped) and marks
// dirty, with a new claims generation, every Service whose outcome may have changed.
func (p *Proxier) reclaim(nn types.NamespacedName) {
	var claims []claim
	svc := p.service(nn)
	if svc != nil && !p.budget.isRefused(nn) {
		if skip, _ := model.ShouldSkipService(svc, p.opts.ServiceProxyName, p.opts.Skip); !skip {
			claims = claimsOf(model.ServicePortsFromService(svc, model.ConvertOptions{
				ProxyLoadBalancerIPs: p.opts.ProxyLoadBalancerIPs, Served: model.DualStack}), p.addrPolicy())
		}
	}
	var created time.Time
	if svc != nil {
		created = svc.CreationTimestamp.Time
	}
	for _, a := range p.claims.set(nn, created, claims) {
		p.bumpClaimGen(a)
		p.dirty.Insert(a)
	}
}

// noteExempt records the ClusterIPs of nn when the proxier skips it (skipServices, another
// proxy's label): new connections to them pass the ServiceCIDR drop. It reports whether the
// exempted addresses changed.
func (p *Proxier) noteExempt(nn types.NamespacedName) bool {
	var ips []netip.Addr
	if svc := p.service(nn); svc != nil {
		if skip, _ := model.ShouldSkipService(svc, p.opts.ServiceProxyName, p.opts.Skip); skip {
			ips = model.ClusterIPs(svc)
		}
	}
	if slices.Equal(ips, p.exempt[nn]) {
		return false
	}
	if len(ips) == 0 {
		delete(p.exempt, nn)
	} else {
		p.exempt[nn] = ips
	}
	return true
}

// exemptIPs returns the skipped Services' ClusterIPs and the addresses skipServices lists,
// sorted, once each.
func (p *Proxier) exemptIPs() []netip.Addr {
	out := p.opts.Skip.IPs.UnsortedList()
	for _, ips := range p.exempt {
		out = append(out, ips...)
	}
	slices.SortFunc(out, func(a, b netip.Addr) int { return a.Compare(b) })
	return slices.Compact(out)
}
