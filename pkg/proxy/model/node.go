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
