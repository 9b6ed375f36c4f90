package framework

import (
	"context"
	"fmt"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiv1"
)

// This file holds the helpers of the antctl trace tests (test/e2e/trace_test.go): the agent's
// trace, and Open vSwitch's own ofproto/trace of the same packet on the node's bridge.

// Trace is GET /v1/trace: the agent's trace of a new connection from from to to.
func (a *AgentAPI) Trace(ctx context.Context, from, to string) (*apiv1.Trace, error) {
	var tr apiv1.Trace
	if err := a.get(ctx, apiv1.PathTrace, url.Values{apiv1.QueryFrom: {from}, apiv1.QueryTo: {to}}, &tr); err != nil {
		return nil, err
	}
	return &tr, nil
}

// Antctl runs the sandbox's antctl against the node's agent socket and returns its stdout (and
// stderr, on failure).
func (n *Node) Antctl(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(n.s.Bins.Dir, "antctl"), append(args, "--socket", n.API.Socket)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("antctl %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// OVSTrace is what ovs-appctl ofproto/trace made of a packet.
type OVSTrace struct {
	// Output is the whole ofproto/trace output.
	Output string
	// DatapathActions are the "Datapath actions:" lines, one per recirculation, in order.
	DatapathActions []string
}

// TraceOVS runs ofproto/trace on the node's bridge for the packet the agent's trace entered
// with (in_port, MACs, addresses, ports; a TCP packet carries SYN), as the first packet of a
// connection: ofproto/trace gives each recirculation after ct the state trk,new.
func (n *Node) TraceOVS(p apiv1.TracePacket) (*OVSTrace, error) {
	src, sport, err := splitHostPort(p.Src)
	if err != nil {
		return nil, err
	}
	dst, dport, err := splitHostPort(p.Dst)
	if err != nil {
		return nil, err
	}
	proto := strings.ToLower(p.Protocol)
	ipField := "nw"
	if strings.Contains(src, ":") {
		proto, ipField = proto+"6", "ipv6"
	}
	flow := fmt.Sprintf("in_port=%d,%s,dl_src=%s", p.InPort, proto, p.EthSrc)
	if p.EthDst != "" {
		flow += ",dl_dst=" + p.EthDst
	}
	flow += fmt.Sprintf(",%s_src=%s,%s_dst=%s,tp_src=%s,tp_dst=%s", ipField, src, ipField, dst, sport, dport)
	if p.Protocol == "TCP" {
		flow += ",tcp_flags=0x002"
	}
	out, err := n.OVS.Trace(Bridge, flow)
	if err != nil {
		return nil, fmt.Errorf("node %s: ofproto/trace %s: %w: %s", n.Name, flow, err, out)
	}
	tr := &OVSTrace{Output: out}
	for _, line := range strings.Split(out, "\n") {
		if a, ok := strings.CutPrefix(strings.TrimSpace(line), "Datapath actions:"); ok {
			tr.DatapathActions = append(tr.DatapathActions, strings.TrimSpace(a))
		}
	}
	if len(tr.DatapathActions) == 0 {
		return nil, fmt.Errorf("node %s: ofproto/trace %s printed no datapath actions:\n%s", n.Name, flow, out)
	}
	return tr, nil
}

// DNATs returns the destinations of the nat(dst=...) actions of the trace.
func (t *OVSTrace) DNATs() []string {
	var out []string
	for _, a := range t.DatapathActions {
		for rest := a; ; {
			i := strings.Index(rest, "nat(dst=")
			if i < 0 {
				break
			}
			rest = rest[i+len("nat(dst="):]
			end := strings.IndexAny(rest, "),")
			if end < 0 {
				break
			}
			out = append(out, rest[:end])
		}
	}
	return out
}

// Verdict classifies the trace as the agent's trace does: "reject" when a packet went to the
// controller, "drop" when the last datapath actions are drop, else "output".
func (t *OVSTrace) Verdict() string {
	for _, a := range t.DatapathActions {
		if strings.Contains(a, "controller") {
			return "reject"
		}
	}
	if t.DatapathActions[len(t.DatapathActions)-1] == "drop" {
		return "drop"
	}
	return "output"
}

func splitHostPort(s string) (string, string, error) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return "", "", fmt.Errorf("%q is not IP:PORT", s)
	}
	return strings.Trim(s[:i], "[]"), s[i+1:], nil
}
