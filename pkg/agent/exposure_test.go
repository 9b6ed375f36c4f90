package agent

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/antrea-proxy/antrea-proxy/pkg/nodenet"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/model"
)

var a = netip.MustParseAddr

func lbPort(name string, nodePort uint16, ipv6 bool, ext []netip.Addr, ing ...model.LBIngress) proxy.PortStatus {
	return proxy.PortStatus{IPv6: ipv6, Port: model.ServicePort{Name: model.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "default", Name: name}},
		Protocol: model.TCP, Port: 80, NodePort: nodePort, ExternalIPs: ext, LoadBalancerIngress: ing,
		ClusterIPs: []netip.Addr{a("10.96.0.10"), a("fd00:96::10")}}}
}

func TestExposureOf(t *testing.T) {
	vip := model.LBIngress{IP: a("172.18.0.100"), Decision: model.Decision{Program: true}}
	proxyMode := model.LBIngress{IP: a("172.18.0.101"), IPMode: "Proxy", Decision: model.Decision{Program: false}}
	v6 := model.LBIngress{IP: a("fd00:18::1"), Decision: model.Decision{Program: true}}
	svcs := []proxy.ServiceStatus{
		{Name: types.NamespacedName{Namespace: "default", Name: "web"}, Ports: []proxy.PortStatus{
			lbPort("web", 30080, false, []netip.Addr{a("192.0.2.7")}, vip, proxyMode, v6),
			lbPort("web", 30080, true, nil, vip, proxyMode, v6),
		}},
		{Name: types.NamespacedName{Namespace: "default", Name: "plain"}, Ports: []proxy.PortStatus{lbPort("plain", 0, false, nil)}},
		{Name: types.NamespacedName{Namespace: "default", Name: "other"}, Ports: []proxy.PortStatus{{Port: model.ServicePort{
			Protocol: model.UDP, Port: 53, ClusterIPs: []netip.Addr{a("10.96.0.2")}}}}},
	}
	npAddrs := []netip.Addr{a("192.168.50.11"), a("192.168.50.1")} // the proxier's, in its order
	want := nodenet.Exposure{NodePorts: []nodenet.PortProto{{Protocol: "tcp", Port: 30080}},
		NodePortAddresses: []netip.Addr{a("192.168.50.11"), a("192.168.50.1")},
		IPs:               []netip.Addr{a("172.18.0.100"), a("192.0.2.7"), a("fd00:18::1")},
		// Every ClusterIP of the port status's family, once.
		ClusterIPs: []netip.Addr{a("10.96.0.2"), a("10.96.0.10"), a("fd00:96::10")}}
	got := exposureOf(svcs, npAddrs)
	require.Empty(t, cmp.Diff(want, got, cmp.Comparer(func(x, y netip.Addr) bool { return x == y })))
	require.True(t, got.Equal(want))
	require.False(t, got.Equal(nodenet.Exposure{}))
	npAddrs[0] = a("192.168.50.99")
	require.True(t, got.Equal(want), "the exposure keeps its own copy of the addresses")
	other := want
	other.NodePortAddresses = want.NodePortAddresses[:1]
	require.False(t, got.Equal(other), "the NodePort addresses are part of the exposure")
	other = want
	other.ClusterIPs = want.ClusterIPs[1:]
	require.False(t, got.Equal(other), "the ClusterIPs are part of the exposure")
}
