package tracer

import (
	"net/netip"
	"testing"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/oftrace"
)

// connection follows one TCP connection through the pipeline with one conntrack.
type connection struct {
	t  *testing.T
	tr *oftrace.Tracer
	ct *oftrace.Conntrack
}

func (c *connection) send(p oftrace.Packet) oftrace.Outcome {
	c.t.Helper()
	res, err := c.tr.Trace(p, c.ct)
	if err != nil {
		c.t.Fatalf("trace %v: %v", p, err)
	}
	o, ok := res.Single()
	if !ok || o.Kind != oftrace.Output {
		c.t.Fatalf("want one output, got:\n%s", res)
	}
	return o
}

func expectOut(t *testing.T, what string, o oftrace.Outcome, port uint32, src, dst netip.AddrPort) {
	t.Helper()
	gotSrc := netip.AddrPortFrom(o.Packet.Src, o.Packet.SrcPort)
	gotDst := netip.AddrPortFrom(o.Packet.Dst, o.Packet.DstPort)
	if o.Port != port || gotSrc != src || gotDst != dst {
		t.Errorf("%s: want output:%d %s -> %s, got %v", what, port, src, dst, o)
	}
}

func ap(a netip.Addr, port uint16) netip.AddrPort { return netip.AddrPortFrom(a, port) }

// TestReplyOfClusterIPConnection: a pod's connection to the ClusterIP is DNATed to the
// endpoint; the endpoint's reply comes back from the ClusterIP; later packets stay DNATed.
func TestReplyOfClusterIPConnection(t *testing.T) {
	e := newEnv(t, true)
	svcIP := netip.MustParseAddr("10.96.0.60")
	e.add(service("web", svcIP.String()), slice("web", local(ep1IP)))
	c := &connection{t: t, tr: e.tracer(), ct: oftrace.NewConntrack()}

	expectOut(t, "request", c.send(fromPod(clientPort, 40000, svcIP, 80)), ep1Port, ap(clientPodIP, 40000), ap(ep1IP, 8080))
	expectOut(t, "reply", c.send(fromPod(ep1Port, 8080, clientPodIP, 40000)), clientPort, ap(svcIP, 80), ap(clientPodIP, 40000))
	expectOut(t, "next request", c.send(fromPod(clientPort, 40000, svcIP, 80)), ep1Port, ap(clientPodIP, 40000), ap(ep1IP, 8080))
}

// TestReplyOfExternalNodePortConnection: an external connection to the NodePort is DNATed to a
// local endpoint and SNATed to the Service virtual IP; the reply is un-SNATed and un-DNATed
// back to the client through the gateway; the next packet gets both NATs again (the
// established-SNAT lookup in ConntrackState).
func TestReplyOfExternalNodePortConnection(t *testing.T) {
	e := newEnv(t, true)
	e.add(service("np", "10.96.0.61", nodePort(30400)), slice("np", local(ep1IP)))
	c := &connection{t: t, tr: e.tracer(), ct: oftrace.NewConntrack()}

	req := fromGateway(externalIP, 40000, nodePortVIP, 30400)
	expectOut(t, "request", c.send(req), ep1Port, ap(serviceVIP, 40000), ap(ep1IP, 8080))
	expectOut(t, "reply", c.send(fromPod(ep1Port, 8080, serviceVIP, 40000)), gwPort, ap(nodePortVIP, 30400), ap(externalIP, 40000))
	o := c.send(req)
	expectOut(t, "next request", o, ep1Port, ap(serviceVIP, 40000), ap(ep1IP, 8080))
	if len(c.ct.Conns()) != 2 {
		t.Errorf("want one connection in each of the Service and SNAT zones, got %+v", c.ct.Conns())
	}
}

// TestReplyOfExternalConnectionToRemoteEndpoint: the external connection leaves again through
// the gateway (IN_PORT hairpin) towards the other node; the remote endpoint's reply, routed
// back into the gateway, is un-NATed and hairpinned to the host.
func TestReplyOfExternalConnectionToRemoteEndpoint(t *testing.T) {
	e := newEnv(t, true)
	e.add(service("np", "10.96.0.62", nodePort(30500)), slice("np", remote(remoteEPIP)))
	c := &connection{t: t, tr: e.tracer(), ct: oftrace.NewConntrack()}

	expectOut(t, "request", c.send(fromGateway(externalIP, 40000, nodePortVIP, 30500)), gwPort, ap(serviceVIP, 40000), ap(remoteEPIP, 8080))
	expectOut(t, "reply", c.send(fromGateway(remoteEPIP, 8080, serviceVIP, 40000)), gwPort, ap(nodePortVIP, 30500), ap(externalIP, 40000))
}

// TestHairpin: a pod that reaches its own Service and lands on itself sees the connection come
// from the hairpin address, and its reply goes back to it from the ClusterIP.
func TestHairpin(t *testing.T) {
	e := newEnv(t, true)
	svcIP := netip.MustParseAddr("10.96.0.63")
	e.add(service("self", svcIP.String()), slice("self", local(ep1IP)))
	c := &connection{t: t, tr: e.tracer(), ct: oftrace.NewConntrack()}

	hairpin := netip.MustParseAddr("169.254.0.254")
	expectOut(t, "request", c.send(fromPod(ep1Port, 40000, svcIP, 80)), ep1Port, ap(hairpin, 40000), ap(ep1IP, 8080))
	expectOut(t, "reply", c.send(fromPod(ep1Port, 8080, hairpin, 40000)), ep1Port, ap(svcIP, 80), ap(ep1IP, 40000))
}
