package agent

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
	"github.com/antrea-proxy/antrea-proxy/pkg/nodenet"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/observe"
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
			Protocol: model.UDP, Port: 53, ClusterIPs: []netip.Addr{a("10.96.0.2")}, ExternalIPs: []netip.Addr{a("192.0.2.7"), a("fd00:7::7")}}}}},
	}
	npAddrs := []netip.Addr{a("192.168.50.11"), a("192.168.50.1")} // the proxier's, in its order
	cidrs := []netip.Prefix{netip.MustParsePrefix("fd00:96::/112"), netip.MustParsePrefix("10.96.0.1/12"), netip.MustParsePrefix("10.96.0.0/12")}
	want := nodenet.Exposure{NodePorts: []nodenet.PortProto{{Protocol: "tcp", Port: 30080}},
		NodePortAddresses: []netip.Addr{a("192.168.50.11"), a("192.168.50.1")},
		// Each ExternalIP and programmed LB IP of the port status's family with the port's
		// protocol and port: never the NodePort, never a Proxy-mode ingress.
		Ports: []nodenet.AddrPortProto{{Addr: a("172.18.0.100"), Protocol: "tcp", Port: 80}, {Addr: a("192.0.2.7"), Protocol: "tcp", Port: 80},
			{Addr: a("192.0.2.7"), Protocol: "udp", Port: 53}, {Addr: a("fd00:18::1"), Protocol: "tcp", Port: 80}},
		// Every ClusterIP of the port status's family, once.
		ClusterIPs: []netip.Addr{a("10.96.0.2"), a("10.96.0.10"), a("fd00:96::10")},
		// Masked, sorted, once.
		ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("fd00:96::/112")}}
	got := exposureOf(svcs, npAddrs, cidrs)
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
	other = want
	other.Ports = want.Ports[1:]
	require.False(t, got.Equal(other), "the Service ports are part of the exposure")
	other = want
	other.ServiceCIDRs = nil
	require.False(t, got.Equal(other), "the ServiceCIDRs are part of the exposure")
	require.Equal(t, []netip.Addr{a("172.18.0.100"), a("192.0.2.7"), a("fd00:18::1")}, got.PortAddrs(),
		"the announcer sees each programmed address once")
}

// countingSource is a ServiceSource whose ports change only when the test says so; it counts
// how often the whole Service list is read.
type countingSource struct {
	gen      uint64
	services []proxy.ServiceStatus
	cidrs    []netip.Prefix
	reads    int
}

func (s *countingSource) Services() []proxy.ServiceStatus { s.reads++; return s.services }
func (s *countingSource) NodePortAddresses() []netip.Addr { return nil }
func (s *countingSource) SyncState() (time.Time, int, error) {
	return time.Time{}, 1, nil
}
func (s *countingSource) ServiceCIDRs() []netip.Prefix { return s.cidrs }
func (s *countingSource) PortsGeneration() uint64      { return s.gen }

// TestSyncDoneRecomputesExposureOnlyWhenPortsChange: the first successful sync pushes the
// exposure (even at generation 0); later syncs at the same generation (idle resyncs, endpoint
// changes) read nothing; a new generation is read and pushed, and so is one after a failed sync.
func TestSyncDoneRecomputesExposureOnlyWhenPortsChange(t *testing.T) {
	web := proxy.ServiceStatus{Name: types.NamespacedName{Namespace: "default", Name: "web"}, Ports: []proxy.PortStatus{lbPort("web", 30080, false, nil)}}
	src := &countingSource{services: []proxy.ServiceStatus{web}}
	d := &DataPath{services: src}
	exposed := func() nodenet.Exposure {
		d.exposeMu.Lock()
		defer d.exposeMu.Unlock()
		return d.exposure
	}

	d.SyncDone(observe.SyncResult{Err: errors.New("bundle rejected")})
	require.Equal(t, 0, src.reads, "a failed sync pushes nothing")
	d.SyncDone(observe.SyncResult{})
	require.Equal(t, 1, src.reads, "the first sync pushes, at generation 0 too")
	require.Equal(t, []nodenet.PortProto{{Protocol: "tcp", Port: 30080}}, exposed().NodePorts)
	for range 3 {
		d.SyncDone(observe.SyncResult{Full: true})
	}
	require.Equal(t, 1, src.reads, "syncs that changed no port read nothing")

	src.services, src.gen = nil, 1
	d.SyncDone(observe.SyncResult{})
	require.Equal(t, 2, src.reads)
	require.Empty(t, exposed().NodePorts, "the new generation's exposure is pushed")
	d.SyncDone(observe.SyncResult{})
	require.Equal(t, 2, src.reads)

	// The proxier's ServiceCIDRs reach the host path with its generation (one route per CIDR).
	src.cidrs, src.gen = []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16")}, 2
	d.SyncDone(observe.SyncResult{})
	require.Equal(t, src.cidrs, exposed().ServiceCIDRs, "the exposure carries the proxier's ServiceCIDRs")
}
