package apiv1

import (
	"fmt"
	"net/netip"
	"strings"
)

// PathTrace traces a packet through the agent's installed flows and groups (GET, with
// QueryFrom and QueryTo).
const PathTrace = "/v1/trace"

// Query parameters of /v1/trace.
const (
	// QueryFrom is where the packet comes from: "pod:NS/NAME", "node", "external" or
	// "external:IP".
	QueryFrom = "from"
	// QueryTo is the destination: "IP:PORT" or "IP:PORT/PROTO" (TCP, UDP or SCTP; TCP when
	// omitted); an IPv6 address in brackets.
	QueryTo = "to"
)

// Kinds of trace source (TraceRequest.FromKind).
const (
	FromPod      = "pod"
	FromNode     = "node"
	FromExternal = "external"
)

// DefaultExternalSource is the source address of "--from external" without an IP: a
// documentation address (RFC 5737), which no real client has.
var DefaultExternalSource = netip.MustParseAddr("192.0.2.10")

// DefaultExternalSourceV6 is DefaultExternalSource for an IPv6 destination (RFC 3849).
var DefaultExternalSourceV6 = netip.MustParseAddr("2001:db8::10")

// TraceRequest is a parsed /v1/trace query.
type TraceRequest struct {
	// FromKind is FromPod, FromNode or FromExternal.
	FromKind string
	// PodNamespace and PodName name the pod (FromPod).
	PodNamespace, PodName string
	// ExternalIP is the external client's address (FromExternal); invalid means the default
	// of the destination's family.
	ExternalIP netip.Addr
	To         netip.AddrPort
	Protocol   string // TCP, UDP or SCTP
}

// ParseTraceRequest parses the from and to query values, reporting every problem.
func ParseTraceRequest(from, to string) (TraceRequest, error) {
	var r TraceRequest
	var errs []string
	if err := r.parseFrom(from); err != nil {
		errs = append(errs, err.Error())
	}
	if err := r.parseTo(to); err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) == 0 && r.ExternalIP.IsValid() && r.ExternalIP.Is4() != r.To.Addr().Is4() {
		errs = append(errs, fmt.Sprintf("from %s and to %s are of different IP families", r.ExternalIP, r.To.Addr()))
	}
	if len(errs) > 0 {
		return TraceRequest{}, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return r, nil
}

func (r *TraceRequest) parseFrom(from string) error {
	kind, arg, hasArg := strings.Cut(from, ":")
	switch {
	case kind == FromNode && !hasArg:
		r.FromKind = FromNode
	case kind == FromExternal:
		r.FromKind = FromExternal
		if hasArg {
			ip, err := netip.ParseAddr(arg)
			if err != nil || ip.Zone() != "" {
				return fmt.Errorf("from %q: %q is not an IP address", from, arg)
			}
			r.ExternalIP = ip.Unmap()
		}
	case kind == FromPod && hasArg:
		ns, name, ok := strings.Cut(arg, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return fmt.Errorf("from %q: a pod is pod:NAMESPACE/NAME", from)
		}
		r.FromKind, r.PodNamespace, r.PodName = FromPod, ns, name
	default:
		return fmt.Errorf("from %q: want pod:NAMESPACE/NAME, node, external or external:IP", from)
	}
	return nil
}

func (r *TraceRequest) parseTo(to string) error {
	addr, proto, hasProto := strings.Cut(to, "/")
	r.Protocol = "TCP"
	if hasProto {
		r.Protocol = strings.ToUpper(proto)
		if r.Protocol != "TCP" && r.Protocol != "UDP" && r.Protocol != "SCTP" {
			return fmt.Errorf("to %q: protocol %q is not TCP, UDP or SCTP", to, proto)
		}
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || ap.Port() == 0 || ap.Addr().Zone() != "" {
		return fmt.Errorf("to %q: want IP:PORT[/PROTO] with a port from 1 to 65535 ([IPv6]:PORT)", to)
	}
	r.To = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	return nil
}

// From renders the request's source as the from query value.
func (r TraceRequest) From() string {
	switch r.FromKind {
	case FromPod:
		return FromPod + ":" + r.PodNamespace + "/" + r.PodName
	case FromExternal:
		if r.ExternalIP.IsValid() {
			return FromExternal + ":" + r.ExternalIP.String()
		}
	}
	return r.FromKind
}

// ToString renders the request's destination as the to query value.
func (r TraceRequest) ToString() string { return r.To.String() + "/" + r.Protocol }

// Trace is the answer of /v1/trace: one packet's walk through the installed flows and groups,
// with conntrack state "new" (the first packet of a connection).
type Trace struct {
	Kind       string `json:"kind"` // "Trace"
	APIVersion string `json:"apiVersion"`
	// From and To echo the request.
	From string `json:"from"`
	To   string `json:"to"`
	// Packet is the packet as it entered OVS.
	Packet TracePacket `json:"packet"`
	// Steps are the flows hit, the groups' choices and conntrack's answers, in order.
	Steps []TraceStep `json:"steps"`
	// Service is the Service port the destination belongs to ("" when none does).
	Service string `json:"service"`
	// Candidates are every endpoint the select group (and its second-level groups) could give
	// a new connection: all buckets, not only the one this trace took.
	Candidates []TraceEndpoint `json:"candidates"`
	// Chosen is the endpoint of the bucket this trace took ("" when none): OVS's own hash may
	// pick another of Candidates.
	Chosen string `json:"chosen"`
	// NAT lists the address translations applied, e.g. "dnat 10.96.0.10:80 -> 10.10.1.6:8080".
	NAT []string `json:"nat"`
	// Verdict is "output", "reject" (sent to the controller, which answers a TCP RST or an
	// ICMP unreachable), "drop" or "normal".
	Verdict string `json:"verdict"`
	// Output is where the packet left: "pod NS/NAME (port N)", "gateway NAME (port N)",
	// "controller (reject)" or "" for a drop.
	Output string `json:"output"`
	// Table is the table of the flow that output, rejected or dropped the packet.
	Table string `json:"table"`
	// Reasons say why no Service endpoint was chosen (nothing when one was), and the problems
	// of the Service that owns the destination and of other Services that want it.
	Reasons []string `json:"reasons"`
	// Notes are limits of the trace itself (e.g. learned session affinity flows not included).
	Notes []string `json:"notes"`
}

// TracePacket is the traced packet's headers.
type TracePacket struct {
	InPort   uint32 `json:"inPort"`
	InPortAs string `json:"inPortName"`
	EthSrc   string `json:"ethSrc"`
	EthDst   string `json:"ethDst"`
	Src      string `json:"src"`
	Dst      string `json:"dst"`
	Protocol string `json:"protocol"`
}

// TraceStep is one step of a trace.
type TraceStep struct {
	// Depth is the nesting (resubmits, group buckets and ct recirculations add one).
	Depth int `json:"depth"`
	// Kind is "flow", "miss", "group", "ct", "learn" or "note".
	Kind      string `json:"kind"`
	Table     uint8  `json:"table"`
	TableName string `json:"tableName"`
	// Priority, Match and Actions are the flow's (kind "flow").
	Priority uint16 `json:"priority"`
	Match    string `json:"match"`
	Actions  string `json:"actions"`
	// Text describes other kinds of step.
	Text string `json:"text"`
}

// TraceEndpoint is one candidate endpoint of a Service's select group.
type TraceEndpoint struct {
	Endpoint string `json:"endpoint"` // IP:PORT
	Group    uint32 `json:"group"`
	Bucket   uint32 `json:"bucket"`
	Weight   uint16 `json:"weight"`
}
