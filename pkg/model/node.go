package model

import (
	"net/netip"

	v1 "k8s.io/api/core/v1"
)

// NodePodCIDRs returns a Node's podCIDRs (spec.podCIDRs, else spec.podCIDR), masked; entries
// that do not parse are left out.
func NodePodCIDRs(n *v1.Node) []netip.Prefix {
	if n == nil {
		return nil
	}
	list := n.Spec.PodCIDRs
	if len(list) == 0 && n.Spec.PodCIDR != "" {
		list = []string{n.Spec.PodCIDR}
	}
	var out []netip.Prefix
	for _, s := range list {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
		}
	}
	return out
}

// FamiliesOf returns the IP families of prefixes.
func FamiliesOf(prefixes []netip.Prefix) Families {
	var f Families
	for _, p := range prefixes {
		f.IPv4 = f.IPv4 || p.Addr().Is4()
		f.IPv6 = f.IPv6 || p.Addr().Is6()
	}
	return f
}

// NodePortAddresses returns the addresses of node that serve NodePorts: its InternalIPs and
// ExternalIPs in status order, unmapped, without duplicates, of a family fam serves and, when
// within is not empty, inside one of its prefixes (antreaProxy.nodePortAddresses). The proxier
// programs these (pipeline.NodeConfig.NodePortAddresses) and reports them to the host side: this
// is the one place they are chosen.
func NodePortAddresses(node *v1.Node, within []netip.Prefix, fam Families) []netip.Addr {
	if node == nil {
		return nil
	}
	seen := map[netip.Addr]bool{}
	var out []netip.Addr
	for _, a := range node.Status.Addresses {
		if a.Type != v1.NodeInternalIP && a.Type != v1.NodeExternalIP {
			continue
		}
		ip, err := netip.ParseAddr(a.Address)
		if err != nil {
			continue
		}
		ip = ip.Unmap()
		if seen[ip] || !fam.Serves(ip) || (len(within) > 0 && !containedIn(ip, within)) {
			continue
		}
		seen[ip] = true
		out = append(out, ip)
	}
	return out
}

func containedIn(ip netip.Addr, prefixes []netip.Prefix) bool {
	for _, p := range prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}
