package openflow

import (
	"net"
	"net/netip"
)

// Action is one OpenFlow action. The set of implementations is closed: each type below.
type Action interface {
	isAction()
}

// NATKind says which side of a connection a ct NAT rewrites.
type NATKind uint8

const (
	// NATReply is a bare "nat": it applies the NAT already recorded on the connection (un-NAT).
	NATReply NATKind = iota
	NATSrc
	NATDst
)

// NAT is the nat() clause of a ct action.
// Addr comes first: with the small fields after it a NAT is 32 bytes, not 40 (a select group
// holds one per bucket).
type NAT struct {
	// Addr is zero for NATReply. For NATSrc, an unspecified or zero Addr is "nat(src)": the
	// connection keeps its source address, and conntrack only moves its source port when its
	// reply tuple is already taken (OVS's zero SNAT, the null binding of Linux conntrack).
	Addr netip.Addr
	Kind NATKind
	Port uint16 // 0 keeps the port
	// PortMax, when above Port, makes the port a range (nat(src=ADDR:Port-PortMax)); it
	// requires an address (OVS refuses a range for the all-zero one).
	PortMax uint16
}

// keepsAddress reports whether n is a NATSrc or NATDst without an address ("nat(src)").
func (n NAT) keepsAddress() bool {
	return n.Kind != NATReply && (!n.Addr.IsValid() || n.Addr.IsUnspecified())
}

// CT sends the packet through conntrack.
type CT struct {
	Commit bool
	Zone   uint16
	// Table, when HasTable, resumes the pipeline in that table after conntrack.
	Table    uint8
	HasTable bool
	NAT      *NAT
	// Exec holds actions applied to the connection on commit (SetCtMark only).
	Exec []Action
}

// GroupAction sends the packet to a group.
type GroupAction struct{ ID uint32 }

// GotoTable continues processing in a later table.
type GotoTable struct{ Table uint8 }

// Resubmit re-runs the packet through a table (with the original in_port).
type Resubmit struct{ Table uint8 }

// SetReg loads Value into regN under Mask (zero Mask = whole register).
type SetReg struct {
	Reg   uint8
	Value uint32
	Mask  uint32
}

// SetCtMark sets ct_mark under Mask; valid only inside CT.Exec.
type SetCtMark struct {
	Value uint32
	Mask  uint32
}

// SetEthDst rewrites the destination MAC.
type SetEthDst struct{ MAC net.HardwareAddr }

// SetEthSrc rewrites the source MAC.
type SetEthSrc struct{ MAC net.HardwareAddr }

// Subfield names bits [Start, End] of a field in NXM/OXM syntax, e.g. NXM_NX_REG0[0..15].
// Start == 0 and End == 0 with Whole set means the whole field ("NXM_OF_IP_SRC[]").
type Subfield struct {
	Field string // e.g. "NXM_NX_REG0", "NXM_OF_IP_SRC", "NXM_OF_TCP_DST"
	Whole bool
	Start uint16
	End   uint16
}

// Move copies bits from Src to Dst.
type Move struct{ Src, Dst Subfield }

// LearnSpecKind distinguishes match and load specs of a learn action.
type LearnSpecKind uint8

const (
	// LearnMatch makes the learned flow match Dst against the current packet's Src.
	// With Src empty, the learned flow matches Dst against the packet's own Dst field.
	LearnMatch LearnSpecKind = iota
	// LearnMatchValue makes the learned flow match Dst == Value.
	LearnMatchValue
	// LearnLoad makes the learned flow load the current packet's Src into Dst.
	LearnLoad
	// LearnLoadValue makes the learned flow load Value into Dst.
	LearnLoadValue
)

// LearnSpec is one spec of a learn action.
type LearnSpec struct {
	Kind  LearnSpecKind
	Dst   Subfield
	Src   Subfield
	Value uint64
}

// Learn adds or refreshes a flow built from the current packet.
type Learn struct {
	Table          uint8
	Priority       uint16
	IdleTimeout    uint16
	HardTimeout    uint16
	FinIdleTimeout uint16
	FinHardTimeout uint16
	Cookie         uint64
	DeleteLearned  bool
	// Limit, when not 0, makes the action add no flow while the learned flow's table holds
	// Limit flows or more with the learned flow's Cookie (NXAST_LEARN2, Open vSwitch 2.8+);
	// refreshing a flow that exists is not limited.
	Limit uint32
	// ResultDst, when its Field is set, is a single bit the action sets to 1 when it added
	// or refreshed its flow and to 0 when Limit kept it from adding one.
	ResultDst Subfield
	EthType   EthType
	IPProto   IPProto
	Specs     []LearnSpec
}

// Output sends the packet to an OpenFlow port.
type Output struct{ Port uint32 }

// OutputInPort sends the packet back out of the port it came in on.
type OutputInPort struct{}

// Normal hands the packet to the L2/L3 "normal" pipeline.
type Normal struct{}

// Drop drops the packet. It renders as "drop" and must be the only action.
type Drop struct{}

// Controller sends the packet to the OpenFlow controller.
type Controller struct {
	MaxLen   uint16 // 0 means the whole packet (65535)
	Reason   string // "", "no_match", "action", "invalid_ttl"
	UserData []byte
	Pause    bool
}

func (CT) isAction()           {}
func (GroupAction) isAction()  {}
func (GotoTable) isAction()    {}
func (Resubmit) isAction()     {}
func (SetReg) isAction()       {}
func (SetCtMark) isAction()    {}
func (SetEthDst) isAction()    {}
func (SetEthSrc) isAction()    {}
func (Move) isAction()         {}
func (Learn) isAction()        {}
func (Output) isAction()       {}
func (OutputInPort) isAction() {}
func (Normal) isAction()       {}
func (Drop) isAction()         {}
func (Controller) isAction()   {}
