package tracer

import (
	"net/netip"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/oftrace"
)

// TestOption1Matrix traces the KEP-1860 Option 1 matrix (proxyLoadBalancerIPs × ingress
// ipMode): traffic to the LB IP is load-balanced by OVS only with proxyLoadBalancerIPs=true and
// ipMode VIP or unset; otherwise a pod's packet to it leaves, unchanged, through the gateway
// towards the external load balancer. ClusterIP and NodePort are load-balanced in every case.
func TestOption1Matrix(t *testing.T) {
	lbIP := netip.MustParseAddr("172.18.0.10")
	vip, proxyMode := v1.LoadBalancerIPModeVIP, v1.LoadBalancerIPModeProxy
	cases := []struct {
		name       string
		proxyLBIPs bool
		mode       *v1.LoadBalancerIPMode
		programmed bool
	}{
		{"true/VIP", true, &vip, true},
		{"true/Proxy", true, &proxyMode, false},
		{"true/unset", true, nil, true},
		{"false/VIP", false, &vip, false},
		{"false/Proxy", false, &proxyMode, false},
		{"false/unset", false, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.proxyLBIPs)
			e.add(service("lb", "10.96.0.20", nodePort(30100), loadBalancer(v1.LoadBalancerIngress{IP: lbIP.String(), IPMode: tc.mode})),
				slice("lb", local(ep1IP), remote(remoteEPIP)))
			tr := e.tracer()
			eps := []netip.Addr{ep1IP, remoteEPIP}

			// ClusterIP and NodePort never depend on Option 1.
			expectEndpoints(t, traceAll(t, tr, fromPod(clientPort, 40000, netip.MustParseAddr("10.96.0.20"), 80)), clientPodIP, eps...)
			expectEndpoints(t, traceAll(t, tr, fromGateway(externalIP, 40001, nodePortVIP, 30100)), serviceVIP, eps...)
			expectEndpoints(t, traceAll(t, tr, fromGateway(externalIP, 40002, nodeIP, 30100)), serviceVIP, eps...)
			expectEndpoints(t, traceAll(t, tr, fromPod(clientPort, 40003, nodeIP, 30100)), clientPodIP, eps...)

			podToLB := fromPod(clientPort, 40004, lbIP, 80)
			extToLB := fromGateway(externalIP, 40005, lbIP, 80)
			if tc.programmed {
				expectEndpoints(t, traceAll(t, tr, podToLB), clientPodIP, eps...)
				expectEndpoints(t, traceAll(t, tr, extToLB), serviceVIP, eps...)
				return
			}
			// A pod's packet goes to the external load balancer through the gateway.
			o := expectVerdict(t, traceAll(t, tr, podToLB), oftrace.Output, 20)
			if o.Port != gwPort || o.Packet.Dst != lbIP {
				t.Errorf("pod to an unprogrammed LB IP: want output to the gateway unchanged, got %v", o)
			}
			// The host has no route sending it into OVS; were it to come in anyway, it is not
			// load-balanced.
			expectNotDNATed(t, traceAll(t, tr, extToLB), extToLB)
		})
	}
}
