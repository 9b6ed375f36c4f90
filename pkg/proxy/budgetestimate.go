package proxy

import (
	"github.com/antrea-proxy/antrea-proxy/pkg/model"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// estimateCost returns an upper bound of the OpenFlow entries (flows and group buckets) the
// pipeline builds for a Service of shape sh whose ports have the endpoint counts eps
// (model.SliceEndpointCounts), computed from the counts alone: nothing proportional to ports ×
// addresses is built. It follows pipeline.ServicePort per port and family:
//
//   - one ServiceLB entry per ClusterIP; per ExternalIP, programmed LB ingress IP and NodePort
//     one entry, or three with externalTrafficPolicy=Local (pods, the node, the rest); an LB IP
//     with loadBalancerSourceRanges has one entry per range (two with eTP=Local), one for the
//     node's own connections and one drop flow;
//   - each entry is one flow, two with ClientIP affinity (selected and not selected);
//   - the first port of each family rejects the ClusterIPs' other ports: one flow per ClusterIP;
//   - with affinity, one learn flow per endpoint of each group and one shared DNAT flow per
//     endpoint;
//   - one bucket per endpoint in the cluster group and, with a Local policy in use, one per
//     endpoint on this node in the local group, plus the first-level buckets of groups split
//     into second-level groups.
//
// Refused and claimed addresses are counted (they are decided later, and only remove flows),
// as are duplicate addresses and endpoints that are not ready.
func estimateCost(sh model.Shape, eps map[model.ShapePortKey][2]model.EndpointCount) int {
	total := 0
	for f, fam := range sh.Families {
		if fam.ClusterIPs == 0 {
			continue
		}
		for i, sp := range sh.Ports {
			n := eps[model.ShapePortKey{Name: sp.Name, Protocol: sp.Protocol}][f]
			total += portCost(sh, fam, sp, n, i == 0)
		}
	}
	return total
}

// portCost is estimateCost's bound for one port in one family with n endpoints; first is set
// for the family's first port.
func portCost(sh model.Shape, fam model.ShapeFamily, sp model.ShapePort, n model.EndpointCount, first bool) int {
	variants := 1
	if sh.ExternalLocal {
		variants = 3
	}
	entries := fam.ClusterIPs + variants*fam.ExternalIPs
	if sp.NodePort {
		entries += variants
	}
	extra := 0
	if fam.SourceRanges == 0 {
		entries += variants * fam.LBIngress
	} else {
		perRange := 1
		if sh.ExternalLocal {
			perRange = 2
		}
		entries += fam.LBIngress * (fam.SourceRanges*perRange + 1)
		extra += fam.LBIngress
	}
	flows := entries + extra
	if sh.Sticky {
		flows += entries
	}
	if first {
		flows += fam.ClusterIPs
	}
	local := 0
	if sh.InternalLocal || (sh.ExternalLocal && (sp.NodePort || fam.ExternalIPs > 0 || fam.LBIngress > 0)) {
		local = n.Local
	}
	if sh.Sticky {
		flows += 2*n.All + local
	}
	return flows + n.All + pipeline.SubGroups(n.All) + local + pipeline.SubGroups(local)
}
