package node

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// TestIntegrationNodeDataPath: one node with two pods added by the real antrea-cni binary and an
// external client on the underlay. It checks pod→gateway, host→pod, pod→pod, pod→ClusterIP,
// pod→NodePort, pod→outside (masqueraded), external→NodePort, external→programmed LB IP,
// host→NodePort, that an ipMode=Proxy LB IP is neither in the nftables table nor routed into
// OVS (it follows normal routing to the underlay), and that DEL leaves nothing behind.
func TestIntegrationNodeDataPath(t *testing.T) {
	t.Parallel()
	w := newWorld(t, makeNode("n1", "10.20.0.0/24", underlay+".1"))
	n := w.addNode("n1", 1)
	p1, p2 := n.addPod("p1"), n.addPod("p2")
	require.Equal(t, "10.20.0.2", p1.ip)
	require.Equal(t, "10.20.0.3", p2.ip)
	w.echo.Start(t, p2.ns, "p2", 8080)
	w.echo.Start(t, n.host, "host", 9000)
	w.echo.Start(t, w.ext, "ext", 7000)
	// The ipMode=Proxy LB IP belongs to an external load balancer on the underlay.
	w.must(w.ext, "ip", "addr", "add", "172.18.0.101/32", "dev", "br0")
	// The external network sends the other LB IPs to the node.
	w.must(w.ext, "ip", "route", "add", "172.18.0.100/32", "via", n.ip)
	w.must(w.ext, "ip", "route", "add", "192.0.2.7/32", "via", n.ip)

	w.addService(svcSpec{name: "web", clusterIP: "10.96.0.10", nodePort: 30080, ingress: []v1.LoadBalancerIngress{vip("172.18.0.100")},
		externalIPs: []string{"192.0.2.7"}}, map[string]string{p2.ip: "n1"})
	w.addService(svcSpec{name: "behind-proxy", clusterIP: "10.96.0.11", nodePort: 30081, ingress: []v1.LoadBalancerIngress{proxyMode("172.18.0.101")}},
		map[string]string{p2.ip: "n1"})
	n.waitServices(2)
	waitFor(t, 10*time.Second, "NodePorts in the nftables table", func() bool {
		nft := n.nft()
		return strings.Contains(nft, "30080") && strings.Contains(nft, "30081")
	})

	// The gateway: the podCIDR's first address, up, a stable MAC, classification and forwarding flows.
	out := w.must(n.host, "ip", "-o", "addr", "show", "dev", "antrea-gw0")
	require.Contains(t, out, "inet 10.20.0.1/24")
	gwFlows := n.flows(pipeline.CategoryGateway)
	require.Contains(t, gwFlows, fmt.Sprintf("priority=190,ip actions=set_field:%s->eth_dst,output:%d", n.dp.Gateway().MAC, n.dp.Gateway().OFPort))
	require.Contains(t, n.flows(pipeline.CategoryBase), fmt.Sprintf("in_port=%d actions=set_field:0x1/0xf->reg0", n.dp.Gateway().OFPort))

	expect := func(from string, server, client string, gotServer, gotClient string) {
		t.Helper()
		require.Equal(t, server, gotServer, from)
		require.Equal(t, client, host(gotClient), from)
	}
	s, c := w.dial(p1.ns, "10.20.0.1:9000", n.diag)
	expect("pod→gateway", "host", p1.ip, s, c)
	s, c = w.dial(n.host, p2.ip+":8080", n.diag)
	expect("host→pod", "p2", "10.20.0.1", s, c)
	s, c = w.dial(p1.ns, p2.ip+":8080", n.diag)
	expect("pod→pod", "p2", p1.ip, s, c)
	s, c = w.dial(p1.ns, "10.96.0.10:80", n.diag)
	expect("pod→ClusterIP", "p2", p1.ip, s, c)
	s, c = w.dial(p1.ns, n.ip+":30080", n.diag)
	expect("pod→NodePort", "p2", p1.ip, s, c)
	s, c = w.dial(p1.ns, extIP+":7000", n.diag)
	expect("pod→outside is masqueraded", "ext", n.ip, s, c)
	for i := 0; i < 5; i++ { // several connections: each is SNATed for its whole life
		s, c = w.dial(w.ext, n.ip+":30080", n.diag)
		expect("external→NodePort (SNATed to the Service virtual IP)", "p2", "169.254.0.253", s, c)
	}
	s, c = w.dial(w.ext, "172.18.0.100:80", n.diag)
	expect("external→LB VIP", "p2", "169.254.0.253", s, c)
	s, c = w.dial(w.ext, "192.0.2.7:80", n.diag)
	expect("external→ExternalIP", "p2", "169.254.0.253", s, c)
	s, c = w.dial(n.host, n.ip+":30080", n.diag)
	expect("host→NodePort (to a local pod: not SNATed, from the gateway's address)", "p2", "10.20.0.1", s, c)
	s, c = w.dial(n.host, "10.96.0.10:80", n.diag)
	expect("host→ClusterIP (to a local pod: from the gateway's address)", "p2", "10.20.0.1", s, c)

	// ipMode=Proxy: no rule, no route; the pod reaches the external load balancer.
	require.NotContains(t, n.nft(), "172.18.0.101")
	routes := n.routes()
	require.NotContains(t, routes, "172.18.0.101")
	// The programmed LB IP and the ExternalIP go into OVS on their Service's port only (marked by
	// nftables, policy-routed), never as a host route of the whole address.
	require.NotContains(t, routes, "172.18.0.100")
	require.NotContains(t, routes, "192.0.2.7")
	nft := n.nft()
	require.Contains(t, nft, "172.18.0.100 . tcp . 80")
	require.Contains(t, nft, "192.0.2.7 . tcp . 80")
	s, c = w.dial(p1.ns, "172.18.0.101:7000", n.diag)
	expect("pod→Proxy-mode LB IP follows normal routing", "ext", n.ip, s, c)
	w.unanswered(w.ext, "172.18.0.101:80") // the LB's own port 80 has no server: OVS did not take it

	// DEL: no port, no flow, no address left; the gateway stays.
	host1 := p1.res.Interfaces[0].Name
	ofport := strings.TrimSpace(must(n.ovs.Vsctl("get", "Interface", host1, "ofport")))
	out, code := n.cni("DEL", "p1", p1.ns)
	require.Equal(t, 0, code, out)
	ports := must(n.ovs.Vsctl("list-ports", bridge))
	require.NotContains(t, ports, host1)
	require.Contains(t, ports, "antrea-gw0")
	podFlows := n.flows(pipeline.CategoryPod)
	require.NotContains(t, podFlows, "in_port="+ofport+",")
	require.NotContains(t, podFlows, p1.ip+" ")
	require.NotContains(t, w.must(n.host, "ip", "-o", "link", "show"), host1)
	require.NotContains(t, w.must(p1.ns, "ip", "-o", "addr", "show"), p1.ip)
	require.Equal(t, gwFlows, n.flows(pipeline.CategoryGateway))
	s, c = w.dial(w.ext, n.ip+":30080", n.diag)
	expect("external→NodePort after DEL of another pod", "p2", "169.254.0.253", s, c)
}

func must(out string, err error) string {
	if err != nil {
		panic(fmt.Sprintf("%v: %s", err, out))
	}
	return out
}
