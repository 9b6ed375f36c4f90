package pipeline

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// TestExternalPolicyLocalServesTheNodeItself: with externalTrafficPolicy=Local and no local
// endpoint, the node's own connections (BitFromHost) to the NodePort, the LB IP and the
// ExternalIP go to the cluster group, one priority above the flows that drop external
// traffic; with externalTrafficPolicy=Cluster no such flow exists (the node's connections take
// the ordinary flows, and ServiceSNAT SNATs them by BitFromHost).
func TestExternalPolicyLocalServesTheNodeItself(t *testing.T) {
	n := NodeConfig{Round: 1, IPv4: true, GatewayOFPort: 2, GatewayIPv4: netip.MustParseAddr("169.254.0.253"), NodeName: "n1"}
	sp := model.ServicePort{Protocol: model.TCP, Port: 80, NodePort: 30080, ExternalPolicyLocal: true,
		ClusterIPs:  []netip.Addr{netip.MustParseAddr("10.96.0.10")},
		ExternalIPs: []netip.Addr{netip.MustParseAddr("203.0.113.7")},
		LoadBalancerIngress: []model.LBIngress{{IP: netip.MustParseAddr("172.18.0.100"),
			Decision: model.Decision{Program: true}}}}
	remote := []model.Endpoint{{IP: netip.MustParseAddr("10.10.2.6"), Port: 8080, NodeName: "n2", Ready: true, Serving: true}}
	out := ServicePort(n, ServicePortInput{Port: sp, Endpoints: remote, GroupID: 1, LocalGroupID: 2})

	host := map[string]of.Flow{}
	var dropped []string
	for _, f := range out.Flows {
		text := of.FormatFlow(&f)
		if len(f.Match.Regs) == 1 && f.Match.Regs[0].Mask&BitFromHost != 0 {
			host[matchKey(f)] = f
			if f.Match.Regs[0].Value&BitFromHost == 0 {
				t.Errorf("flow %s matches BitFromHost unset", text)
			}
			if !strings.HasSuffix(text, "actions=group:1") {
				t.Errorf("the node's own connection must go to the cluster group: %s", text)
			}
			continue
		}
		if strings.HasSuffix(text, "actions=drop") {
			dropped = append(dropped, text)
			if h, ok := host[matchKey(f)]; !ok || h.Priority != f.Priority+1 {
				t.Errorf("no flow for the node itself one priority above the drop %s", text)
			}
		}
	}
	if len(host) != 3 || len(dropped) != 3 {
		t.Errorf("want 3 flows for the node itself (NodePort, LB IP, ExternalIP) and 3 drops for external traffic, got %d and %d:\n%s",
			len(host), len(dropped), renderFlows(out.Flows))
	}

	sp.ExternalPolicyLocal = false
	for _, f := range ServicePort(n, ServicePortInput{Port: sp, Endpoints: remote, GroupID: 1, LocalGroupID: 2}).Flows {
		for _, r := range f.Match.Regs {
			if r.Reg == RegSource && r.Mask&BitFromHost != 0 {
				t.Errorf("eTP=Cluster: unexpected flow for the node itself: %s", of.FormatFlow(&f))
			}
		}
	}
}

// matchKey is a flow's destination and port, the part shared by the entries of one way in.
func matchKey(f of.Flow) string { return f.Match.Dst.String() + ":" + strconv.Itoa(int(f.Match.TpDst)) }
