package tracer

import (
	"net/netip"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/oftrace"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

var (
	rangedSvcIP = netip.MustParseAddr("10.96.0.50")
	rangedLBIP  = netip.MustParseAddr("172.18.0.50")
	// gatewayIP is the gateway's own address: the node's own connections reach OVS with it as
	// their source (the host SNATs them to it), so the classifier marks them BitFromHost.
	gatewayIP = podCIDR.Addr().Next()
)

func sourceRanges(r ...string) svcOpt {
	return func(s *v1.Service) { s.Spec.LoadBalancerSourceRanges = r }
}

// TestSourceRangesOfTheNodeItself: loadBalancerSourceRanges decide the node's own connection to
// an LB IP by the node's address (192.168.77.10), as kube-proxy does, not by the gateway
// address it reaches OVS with. A range of pod addresses (which holds the gateway address) keeps
// the node out; a range of node addresses lets it in. Other clients are checked by their source.
func TestSourceRangesOfTheNodeItself(t *testing.T) {
	lb := loadBalancer(v1.LoadBalancerIngress{IP: rangedLBIP.String()})

	t.Run("pod range", func(t *testing.T) {
		e := newEnv(t, true)
		e.add(service("ranged", rangedSvcIP.String(), lb, sourceRanges("10.10.0.0/16")), slice("ranged", remote(remoteEPIP)))
		tr := e.tracer()
		expectVerdict(t, traceAll(t, tr, fromGateway(gatewayIP, 40000, rangedLBIP, 80)), oftrace.Dropped, pipeline.TableServiceLB)
		expectVerdict(t, traceAll(t, tr, fromGateway(externalIP, 40001, rangedLBIP, 80)), oftrace.Dropped, pipeline.TableServiceLB)
		expectEndpoints(t, traceAll(t, tr, fromPod(clientPort, 40002, rangedLBIP, 80)), clientPodIP, remoteEPIP)
	})
	t.Run("node range", func(t *testing.T) {
		e := newEnv(t, true)
		e.add(service("ranged", rangedSvcIP.String(), lb, sourceRanges("192.168.77.0/24")), slice("ranged", remote(remoteEPIP)))
		tr := e.tracer()
		expectEndpoints(t, traceAll(t, tr, fromGateway(gatewayIP, 40000, rangedLBIP, 80)), serviceVIP, remoteEPIP)
		expectEndpoints(t, traceAll(t, tr, fromGateway(externalIP, 40001, rangedLBIP, 80)), serviceVIP, remoteEPIP)
		expectVerdict(t, traceAll(t, tr, fromPod(clientPort, 40002, rangedLBIP, 80)), oftrace.Dropped, pipeline.TableServiceLB)
	})
	t.Run("node range, externalTrafficPolicy=Local without a local endpoint", func(t *testing.T) {
		e := newEnv(t, true)
		e.add(service("ranged", rangedSvcIP.String(), lb, sourceRanges("192.168.77.10/32"), externalLocal), slice("ranged", remote(remoteEPIP)))
		tr := e.tracer()
		// The node's own connection is internal traffic: any endpoint.
		expectEndpoints(t, traceAll(t, tr, fromGateway(gatewayIP, 40000, rangedLBIP, 80)), serviceVIP, remoteEPIP)
		expectVerdict(t, traceAll(t, tr, fromGateway(netip.MustParseAddr("192.168.77.10"), 40001, rangedLBIP, 80)),
			oftrace.Dropped, pipeline.TableServiceLB)
	})
}
