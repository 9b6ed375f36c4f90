package pipeline

import of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"

// Bits of reg4 (RegEndpointPort) the bounded session affinity learn uses.
const (
	bitLearnOK = 17
	// BitLearnOK is the learn's result_dst: 1 when it added or refreshed its flow, 0 when
	// NodeConfig.AffinityFlowsPerService kept it from adding one.
	BitLearnOK uint32 = 1 << bitLearnOK
	// BitLearnCounted marks the pass through SessionAffinityLearn that counts a learn's
	// result (after the learn, before EndpointDNAT).
	BitLearnCounted uint32 = 1 << 18
)

// AffinityRefusedCookieObject is the cookie object (category base) of the flow that counts
// the learns the per-Service bound refused: its packet count, read with an aggregate
// statistics request on its exact cookie, is the number of packets whose learn was refused.
const AffinityRefusedCookieObject = 1

// AffinityRefusedCookie is the cookie of the counting flow in round.
func AffinityRefusedCookie(round uint16) uint64 {
	return Cookie(round, CategoryBase, AffinityRefusedCookieObject)
}

// affinityCountFlows are the flows of the counting pass of bounded learns
// (NodeConfig.AffinityFlowsPerService), in SessionAffinityLearn: the first counts the packets
// whose learn was refused (BitLearnCounted with BitLearnOK clear), the second takes the others.
// Both do nothing else: the learn flow continues to EndpointDNAT once the pass returns.
func affinityCountFlows(n NodeConfig) []of.Flow {
	if n.AffinityFlowsPerService == 0 {
		return nil
	}
	counted := of.RegMatch{Reg: RegEndpointPort, Value: BitLearnCounted, Mask: BitLearnCounted}
	refused := counted
	refused.Mask |= BitLearnOK
	return []of.Flow{
		{Table: TableSessionAffinityLearn, Priority: PriorityHigh, Cookie: AffinityRefusedCookie(n.Round),
			Match: of.Match{Regs: []of.RegMatch{refused}}, Actions: []of.Action{of.Drop{}}},
		{Table: TableSessionAffinityLearn, Priority: PriorityHigh - 1, Cookie: Cookie(n.Round, CategoryBase, 0),
			Match: of.Match{Regs: []of.RegMatch{counted}}, Actions: []of.Action{of.Drop{}}},
	}
}
