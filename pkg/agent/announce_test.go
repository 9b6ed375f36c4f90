package agent

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func lbService(name, typ, annotation string) *v1.Service {
	s := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: v1.ServiceSpec{Type: v1.ServiceType(typ)}}
	if annotation != "" {
		s.Annotations = map[string]string{"antrea-proxy.io/announcing-node": annotation}
	}
	return s
}

func TestAnnouncedIPs(t *testing.T) {
	ip := netip.MustParseAddr
	svcs := []*v1.Service{
		lbService("a", "LoadBalancer", "172.18.0.5=node-1,fd00::5=node-1"),
		lbService("b", "LoadBalancer", "172.18.0.6=node-2"),
		lbService("c", "LoadBalancer", "172.18.0.7=node-1,garbage,172.18.0.5=node-1"),
		lbService("d", "ClusterIP", "172.18.0.8=node-1"),
		lbService("e", "LoadBalancer", ""),
		lbService("f", "LoadBalancer", "172.18.0.9=node-1"),
	}
	// 172.18.0.9 is assigned to node-1 but not programmed (e.g. proxyLoadBalancerIPs=false).
	programmed := []netip.Addr{ip("172.18.0.5"), ip("172.18.0.6"), ip("172.18.0.7"), ip("172.18.0.8"), ip("fd00::5")}
	require.Equal(t, []netip.Addr{ip("172.18.0.5"), ip("172.18.0.7"), ip("fd00::5")}, announcedIPs("node-1", svcs, programmed))
	require.Equal(t, []netip.Addr{ip("172.18.0.6")}, announcedIPs("node-2", svcs, programmed))
	require.Empty(t, announcedIPs("node-3", svcs, programmed))
	require.Empty(t, announcedIPs("node-1", svcs, nil))
}
