package servicetrace

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiv1"
	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/oftrace"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// Run traces the packet req describes through in's flows and groups, as the first packet of a
// new connection (an empty conntrack), and explains the result.
func Run(in *Inputs, req apiv1.TraceRequest) (apiv1.Trace, error) {
	pkt, inPort, err := packet(in, req)
	if err != nil {
		return apiv1.Trace{}, err
	}
	tracer, err := oftrace.New(prune(in.Flows, pkt.Dst), in.Groups, oftrace.Options{})
	if err != nil {
		return apiv1.Trace{}, fmt.Errorf("building the tracer: %w", err)
	}
	tr, err := tracer.Trace(pkt, nil)
	if err != nil {
		return apiv1.Trace{}, fmt.Errorf("tracing %v: %w", pkt, err)
	}
	out := apiv1.Trace{Kind: "Trace", APIVersion: apiv1.APIVersion, From: req.From(), To: req.ToString(),
		Packet: tracePacket(pkt, inPort), Steps: steps(tr), Candidates: []apiv1.TraceEndpoint{},
		NAT: []string{}, Reasons: []string{}, Notes: []string{}}
	groups := make(map[uint32]*of.Group, len(in.Groups))
	for i := range in.Groups {
		groups[in.Groups[i].ID] = &in.Groups[i]
	}
	if g, ok := firstGroup(tr); ok {
		out.Candidates = candidates(groups, g)
	}
	leave := verdict(in, tr, &out)
	out.NAT = nats(pkt, leave)
	if leave.Dst != pkt.Dst || leave.DstPort != pkt.DstPort {
		out.Chosen = netip.AddrPortFrom(leave.Dst, leave.DstPort).String()
	}
	explain(in, req, pkt, &out)
	return out, nil
}

func tracePacket(p oftrace.Packet, inPort string) apiv1.TracePacket {
	return apiv1.TracePacket{InPort: p.InPort, InPortAs: inPort, EthSrc: p.EthSrc.String(), EthDst: p.EthDst.String(),
		Src: netip.AddrPortFrom(p.Src, p.SrcPort).String(), Dst: netip.AddrPortFrom(p.Dst, p.DstPort).String(),
		Protocol: protoName(p.Proto)}
}

func protoName(p of.IPProto) string {
	switch p {
	case of.ProtoUDP:
		return "UDP"
	case of.ProtoSCTP:
		return "SCTP"
	}
	return "TCP"
}

// tableName is a table's pipeline name, or its number when it has none.
func tableName(t uint8) string {
	if n, ok := pipeline.TableNames[t]; ok {
		return n
	}
	return fmt.Sprintf("table%d", t)
}

func steps(tr *oftrace.Trace) []apiv1.TraceStep {
	out := make([]apiv1.TraceStep, 0, len(tr.Steps))
	names := pipeline.Names()
	for _, s := range tr.Steps {
		st := apiv1.TraceStep{Depth: s.Depth, Table: s.Table, TableName: tableName(s.Table), Text: s.Text}
		switch s.Kind {
		case oftrace.StepFlow:
			st.Kind, st.Priority = "flow", s.Flow.Priority
			st.Match, st.Actions = of.FormatMatchNamed(&s.Flow.Match, names), of.FormatActionsNamed(s.Flow.Actions, names)
		case oftrace.StepMiss:
			st.Kind, st.Text = "miss", "no flow matched (table miss: drop)"
		case oftrace.StepGroup:
			st.Kind = "group"
		case oftrace.StepCT:
			st.Kind = "ct"
		case oftrace.StepLearn:
			st.Kind = "learn"
		default:
			st.Kind = "note"
		}
		out = append(out, st)
	}
	return out
}

// firstGroup is the first select group the packet went through (the Service port's group).
func firstGroup(tr *oftrace.Trace) (uint32, bool) {
	for _, s := range tr.Steps {
		if s.Kind == oftrace.StepGroup {
			return s.Group, true
		}
	}
	return 0, false
}

// verdict fills the verdict, output and table from the trace's outcomes and returns the packet
// as it left (or as it was dropped).
func verdict(in *Inputs, tr *oftrace.Trace, out *apiv1.Trace) oftrace.Packet {
	if o := tr.Outputs(); len(o) > 0 {
		out.Verdict, out.Output, out.Table = "output", portName(in, o[0].Port), tableName(o[0].Table)
		return o[0].Packet
	}
	o := tr.Outcomes[0]
	out.Table = tableName(o.Table)
	switch o.Kind {
	case oftrace.Controller:
		out.Verdict, out.Output = "reject", "controller (reject: TCP RST or ICMP unreachable)"
	case oftrace.Normal:
		out.Verdict, out.Output = "normal", "NORMAL (L2 switching)"
	default:
		out.Verdict = "drop"
		reason := o.Reason
		if reason == "drop" {
			reason = "a drop action"
		}
		out.Notes = append(out.Notes, fmt.Sprintf("dropped in %s: %s", out.Table, reason))
	}
	return o.Packet
}

func portName(in *Inputs, port uint32) string {
	if port == in.Gateway.OFPort {
		return gatewayName(in.Gateway)
	}
	for _, p := range in.Pods {
		if p.OFPort == port {
			return podName(p)
		}
	}
	return fmt.Sprintf("port %d", port)
}

// nats describes how the packet's addresses changed between entering and leaving.
func nats(in, out oftrace.Packet) []string {
	res := []string{}
	if out.Dst != in.Dst || out.DstPort != in.DstPort {
		res = append(res, fmt.Sprintf("dnat %s -> %s", netip.AddrPortFrom(in.Dst, in.DstPort), netip.AddrPortFrom(out.Dst, out.DstPort)))
	}
	if out.Src != in.Src || out.SrcPort != in.SrcPort {
		res = append(res, fmt.Sprintf("snat %s -> %s", netip.AddrPortFrom(in.Src, in.SrcPort), netip.AddrPortFrom(out.Src, out.SrcPort)))
	}
	return res
}

// join renders a list for a reason.
func join[T fmt.Stringer](xs []T) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = x.String()
	}
	return strings.Join(s, ", ")
}
