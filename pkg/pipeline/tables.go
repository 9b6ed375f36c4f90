package pipeline

// Table numbers of the pipeline. A packet moves on to higher numbers (goto_table, ct(table=)),
// except where it resubmits, which visits a table and comes back: NodePortMark resubmits to
// SessionAffinity before it goes on to ServiceLB, ServiceLB's rejects resubmit to RejectMeter,
// and a Service with session affinity resubmits from its group bucket or learned flow to
// SessionAffinityLearn and then back to EndpointDNAT (17 → 15). Gaps leave room for features.
const (
	// TableClassifier classifies packets by in_port (gateway, local pod, uplink) into reg0.
	TableClassifier uint8 = 0
	// TableSNATConntrackZone un-SNATs replies of connections SNATed by ServiceSNAT.
	TableSNATConntrackZone uint8 = 5
	// TableConntrackZone looks packets up in the service zone; replies are un-DNATed here.
	TableConntrackZone uint8 = 10
	// TableConntrackState drops invalid packets and sends established ones past load balancing.
	TableConntrackState uint8 = 11
	// TableNodePortMark marks packets whose destination is a NodePort address of this node.
	TableNodePortMark uint8 = 12
	// TableSessionAffinity holds the flows learned for sessionAffinity=ClientIP: they load the
	// endpoint a client used last into registers.
	TableSessionAffinity uint8 = 13
	// TableServiceLB classifies new connections to Services and sends them to their group.
	TableServiceLB uint8 = 14
	// TableEndpointDNAT commits the connection and DNATs it to the endpoint loaded into
	// registers, for Services with session affinity (a bucket or a learned flow loads them);
	// the buckets of other Services DNAT themselves.
	TableEndpointDNAT uint8 = 15
	// TableServiceSNAT SNATs external-to-Service connections (eTP=Cluster) arriving from the
	// gateway, and the node's own Service connections; it records the others' DNATed tuple
	// in the SNAT zone.
	TableServiceSNAT uint8 = 16
	// TableSessionAffinityLearn learns, for Services with session affinity, which endpoint a
	// client got, then continues to EndpointDNAT.
	TableSessionAffinityLearn uint8 = 17
	// TableRejectMeter sends rejected new connections through the meter of their client
	// address's shard (RegRejectShard) to the reject responder; only resubmitted to, and only
	// with NodeConfig.RejectMeters.
	TableRejectMeter uint8 = 18
	// TableConntrackCommit commits new connections that no Service claimed, so that their
	// replies are tracked as established rather than invalid; with nat(src) only those whose
	// tuple a Service connection of this node has as its DNATed tuple, and new TCP connections
	// from other nodes' addresses with a SNAT that always moves their port.
	TableConntrackCommit uint8 = 19
	// TableL3Forwarding forwards by destination IP (filled by the node data path).
	TableL3Forwarding uint8 = 20
)

// TableNames maps table numbers to names, for dumps and antctl (see Names).
var TableNames = map[uint8]string{
	TableClassifier:           "Classifier",
	TableSNATConntrackZone:    "SNATConntrackZone",
	TableConntrackZone:        "ConntrackZone",
	TableConntrackState:       "ConntrackState",
	TableNodePortMark:         "NodePortMark",
	TableSessionAffinity:      "SessionAffinity",
	TableServiceLB:            "ServiceLB",
	TableEndpointDNAT:         "EndpointDNAT",
	TableServiceSNAT:          "ServiceSNAT",
	TableConntrackCommit:      "ConntrackCommit",
	TableSessionAffinityLearn: "SessionAffinityLearn",
	TableRejectMeter:          "RejectMeter",
	TableL3Forwarding:         "L3Forwarding",
}

// Conntrack zones.
const (
	ZoneServiceV4 uint16 = 65520
	ZoneServiceV6 uint16 = 65510
	ZoneSNATV4    uint16 = 65521
	ZoneSNATV6    uint16 = 65511
)

// ct_mark bits.
const (
	// CtMarkService tags connections DNATed to a Service endpoint.
	CtMarkService uint32 = 0x1
	// CtMarkSNAT tags connections SNATed by ServiceSNAT.
	CtMarkSNAT uint32 = 0x2
	// CtMarkServiceTuple tags, in the SNAT zone, the record of a Service connection that
	// ServiceSNAT did not SNAT: its DNATed tuple (client -> endpoint), committed without nat,
	// with CtMarkService too. A later connection straight to the endpoint with that tuple finds
	// it (SNATConntrackZone), as it finds the entry of a SNATed one (CtMarkSNAT).
	CtMarkServiceTuple uint32 = 0x4
)

// Registers.
//
//	reg0[0..3]  packet source: 1 gateway, 2 local pod, 3 uplink/tunnel
//	reg0[4]     destination is a NodePort address of this node
//	reg0[5]     connection reached a Service through NodePort, LB IP or ExternalIP with
//	            externalTrafficPolicy=Cluster: SNAT it when it came from outside the node
//	reg0[6]     the packet comes from the node itself (the host's own stack, through the
//	            gateway, with the gateway's address as source): its Service connections are
//	            internal traffic and are SNATed unless the endpoint is a local pod
//	reg0[7]     the packet's tuple is the DNATed tuple of a Service connection of this node
//	            (found in the SNAT zone): a new connection with it may find its reply tuple
//	            taken, so ConntrackCommit commits it with nat(src)
//	reg3        selected endpoint IPv4 address (session affinity only)
//	reg4[0..15] selected endpoint port (session affinity only)
//	reg4[16]    an endpoint has been selected (session affinity only)
//	reg4[17]    the bounded learn added or refreshed its flow (BitLearnOK)
//	reg4[18]    the counting pass of a bounded learn (BitLearnCounted)
//	reg5        the shard (low bits of the client address) of a rejected packet's meter
//	reg7        the group of the Service port being load-balanced (session affinity)
//	xxreg3      selected endpoint IPv6 address (reg12..reg15; session affinity only)
//
// Nothing after the DNAT commit reads reg3, reg4, reg7 or xxreg3. RegFields names these
// fields for dumps.
const (
	RegSource uint8 = 0

	SourceMask    uint32 = 0xf
	SourceGateway uint32 = 0x1
	SourcePod     uint32 = 0x2
	SourceUplink  uint32 = 0x3

	BitNodePortAddr    uint32 = 1 << 4
	BitExternalService uint32 = 1 << 5
	BitFromHost        uint32 = 1 << 6
	BitServiceTuple    uint32 = 1 << 7

	RegEndpointIPv4 uint8 = 3
	RegEndpointPort uint8 = 4
	RegServiceGroup uint8 = 7
	RegRejectShard  uint8 = 5
	// RegEndpointIPv6First is the first of the four registers (reg12..reg15, xxreg3) that hold an
	// IPv6 endpoint, most significant word first.
	RegEndpointIPv6First uint8 = 12

	EndpointPortMask uint32 = 0xffff
	BitEndpointSet   uint32 = 1 << 16
)

// Priorities: the generic levels most tables share (PriorityND down to PriorityMiss, every
// table's miss), then those of one table, by table in table-number order, each table's from
// highest to lowest; their comments say where they sit between the generic levels.
const (
	// PriorityND switches IPv6 neighbour discovery above every classifier flow but a pod's
	// neighbour spoof guard (the gateway's anti-spoof flows use PriorityHigh).
	PriorityND     uint16 = 220
	PriorityHigh   uint16 = 210
	PriorityNormal uint16 = 200
	PriorityLow    uint16 = 190
	PriorityMiss   uint16 = 0

	// SNATConntrackZone.

	// PriorityServiceTuple marks packets whose tuple is a Service connection's DNATed tuple,
	// below the un-SNAT of replies (PriorityHigh).
	PriorityServiceTuple uint16 = 205

	// ConntrackState.

	// PrioritySNATLookup re-applies SNAT to the later packets of committed Service
	// connections, below the drop of invalid packets (PriorityHigh).
	PrioritySNATLookup uint16 = 205

	// ServiceLB.

	// PriorityHostRange decides, for the node's own connections to an LB IP with
	// loadBalancerSourceRanges, whether the ranges allow them, above the per-range entries
	// (PriorityNormal, +1 for externalTrafficPolicy=Local).
	PriorityHostRange uint16 = 202
	// PriorityRangeDrop drops what loadBalancerSourceRanges does not allow.
	PriorityRangeDrop uint16 = 195
	// PriorityOtherPortICMP lets new ICMP to a ClusterIP continue as before, above
	// PriorityOtherPort: the reject responder answers no ICMP message.
	PriorityOtherPortICMP uint16 = 101
	// PriorityOtherPort rejects new connections to a ClusterIP on a port its Service does not
	// define, below every flow of a Service port.
	PriorityOtherPort uint16 = 100
	// PriorityServiceCIDRExempt lets new connections to a skipped Service's ClusterIP continue
	// as to any address, above PriorityServiceCIDR.
	PriorityServiceCIDRExempt uint16 = 95
	// PriorityServiceCIDR drops new connections to an address inside a ServiceCIDR that no
	// Service port claimed, below the ClusterIPs' other-port rejects.
	PriorityServiceCIDR uint16 = 90

	// ServiceSNAT.

	// PriorityHostSNAT SNATs the Service connections of the node itself, above the SNAT of
	// external connections (PriorityNormal), which host connections may also be marked for.
	PriorityHostSNAT uint16 = 201

	// ConntrackCommit.

	// PriorityPeerLowPorts, PriorityPeerHighPorts and PriorityPeer commit the new TCP
	// connections from other nodes' addresses: from a port below 1024 plain, from 32768 up and
	// from the rest with a SNAT that moves the port (peerCommitFlows); below the zero SNAT of
	// tagged connections (PriorityHigh).
	PriorityPeerLowPorts  uint16 = 204
	PriorityPeerHighPorts uint16 = 203
	PriorityPeer          uint16 = 202
)
