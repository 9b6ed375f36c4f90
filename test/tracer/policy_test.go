package tracer

import (
	"net/netip"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/oftrace"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

var (
	localSvcIP = netip.MustParseAddr("10.96.0.30")
	localLBIP  = netip.MustParseAddr("172.18.0.30")
)

// TestExternalTrafficPolicyLocal: external connections to the NodePort and the LB IP reach only
// this node's endpoints, without SNAT (the client address is preserved); pods on this node
// short-circuit to every endpoint; the ClusterIP is unaffected.
func TestExternalTrafficPolicyLocal(t *testing.T) {
	e := newEnv(t, true)
	e.add(service("etp", localSvcIP.String(), nodePort(30200), loadBalancer(v1.LoadBalancerIngress{IP: localLBIP.String()}), externalLocal),
		slice("etp", local(ep1IP), local(ep2IP), remote(remoteEPIP)))
	tr := e.tracer()
	all := []netip.Addr{ep1IP, ep2IP, remoteEPIP}

	expectEndpoints(t, traceAll(t, tr, fromGateway(externalIP, 40000, nodePortVIP, 30200)), externalIP, ep1IP, ep2IP)
	expectEndpoints(t, traceAll(t, tr, fromGateway(externalIP, 40001, nodeIP, 30200)), externalIP, ep1IP, ep2IP)
	expectEndpoints(t, traceAll(t, tr, fromGateway(externalIP, 40002, localLBIP, 80)), externalIP, ep1IP, ep2IP)
	expectEndpoints(t, traceAll(t, tr, fromPod(clientPort, 40003, nodeIP, 30200)), clientPodIP, all...)
	expectEndpoints(t, traceAll(t, tr, fromPod(clientPort, 40004, localLBIP, 80)), clientPodIP, all...)
	expectEndpoints(t, traceAll(t, tr, fromPod(clientPort, 40005, localSvcIP, 80)), clientPodIP, all...)
}

// TestExternalTrafficPolicyLocalWithoutLocalEndpoint: external connections are dropped in
// ServiceLB (not rejected: the Service has endpoints elsewhere); pods and the ClusterIP still
// reach the remote endpoint.
func TestExternalTrafficPolicyLocalWithoutLocalEndpoint(t *testing.T) {
	e := newEnv(t, true)
	e.add(service("etp", localSvcIP.String(), nodePort(30200), loadBalancer(v1.LoadBalancerIngress{IP: localLBIP.String()}), externalLocal),
		slice("etp", remote(remoteEPIP)))
	tr := e.tracer()

	for _, p := range []oftrace.Packet{
		fromGateway(externalIP, 40000, nodePortVIP, 30200),
		fromGateway(externalIP, 40001, nodeIP, 30200),
		fromGateway(externalIP, 40002, localLBIP, 80),
	} {
		expectVerdict(t, traceAll(t, tr, p), oftrace.Dropped, pipeline.TableServiceLB)
	}
	expectEndpoints(t, traceAll(t, tr, fromPod(clientPort, 40003, nodeIP, 30200)), clientPodIP, remoteEPIP)
	expectEndpoints(t, traceAll(t, tr, fromPod(clientPort, 40004, localSvcIP, 80)), clientPodIP, remoteEPIP)
}

// TestInternalTrafficPolicyLocal: pod connections to the ClusterIP reach only local endpoints,
// and are dropped when there is none.
func TestInternalTrafficPolicyLocal(t *testing.T) {
	e := newEnv(t, true)
	e.add(service("itp", "10.96.0.40", internalLocal), slice("itp", local(ep2IP), remote(remoteEPIP)),
		service("itp-none", "10.96.0.41", internalLocal), slice("itp-none", remote(remoteEPIP)))
	tr := e.tracer()

	expectEndpoints(t, traceAll(t, tr, fromPod(clientPort, 40000, netip.MustParseAddr("10.96.0.40"), 80)), clientPodIP, ep2IP)
	expectVerdict(t, traceAll(t, tr, fromPod(clientPort, 40001, netip.MustParseAddr("10.96.0.41"), 80)), oftrace.Dropped, pipeline.TableServiceLB)
}

// TestServiceWithoutEndpointsIsRejected: a new connection to a Service port without endpoints
// goes to the controller (the reject responder), whichever way it comes in.
func TestServiceWithoutEndpointsIsRejected(t *testing.T) {
	e := newEnv(t, true)
	e.add(service("empty", "10.96.0.50", nodePort(30300)), slice("empty"))
	tr := e.tracer()
	for _, p := range []oftrace.Packet{
		fromPod(clientPort, 40000, netip.MustParseAddr("10.96.0.50"), 80),
		fromGateway(externalIP, 40001, nodePortVIP, 30300),
	} {
		o := expectVerdict(t, traceAll(t, tr, p), oftrace.Controller, pipeline.TableServiceLB)
		if o.Controller.MaxLen != pipeline.RejectMaxLen || len(o.Controller.UserData) != 0 || o.Packet.Dst != p.Dst {
			t.Errorf("%v: want the reject controller action on the original packet, got %v", p, o)
		}
	}
}
