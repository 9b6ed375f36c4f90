package tracer

import (
	"net/netip"
	"testing"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/oftrace"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// TestServiceCIDRDrop: with the ServiceCIDRs known, a pod's new connection to an unallocated
// ClusterIP is dropped in ServiceLB instead of leaving through the gateway; one to a skipped
// Service's ClusterIP (another proxy's label) and ICMP to any ClusterIP continue as before;
// programmed ClusterIPs are load-balanced as before.
func TestServiceCIDRDrop(t *testing.T) {
	unallocated := netip.MustParseAddr("10.96.0.99")
	skipped := netip.MustParseAddr("10.96.0.53")
	other := service("other-proxy", skipped.String())
	other.Labels = map[string]string{model.LabelServiceProxyName: "someone-else"}

	e := newEnv(t, true)
	e.add(service("web", "10.96.0.20"), slice("web", local(ep1IP)), other)
	before := e.tracer()
	o := expectVerdict(t, traceAll(t, before, fromPod(clientPort, 42000, unallocated, 80)), oftrace.Output, pipeline.TableL3Forwarding)
	if o.Port != gwPort {
		t.Fatalf("without ServiceCIDRs an unallocated ClusterIP leaves through the gateway, got %v", o)
	}

	e.p.SetServiceCIDRs([]netip.Prefix{netip.MustParsePrefix("10.96.0.0/16")})
	tr := e.tracer()
	expectVerdict(t, traceAll(t, tr, fromPod(clientPort, 42001, unallocated, 80)), oftrace.Dropped, pipeline.TableServiceLB)
	o = expectVerdict(t, traceAll(t, tr, fromPod(clientPort, 42002, skipped, 53)), oftrace.Output, pipeline.TableL3Forwarding)
	if o.Port != gwPort || o.Packet.Dst != skipped {
		t.Errorf("a skipped Service's ClusterIP must pass unchanged, got %v", o)
	}
	icmp := fromPod(clientPort, 0, unallocated, 0)
	icmp.Proto, icmp.ICMPType = openflow.ProtoICMP, 8
	if o := expectVerdict(t, traceAll(t, tr, icmp), oftrace.Output, pipeline.TableL3Forwarding); o.Port != gwPort {
		t.Errorf("ICMP to an unallocated ClusterIP continues as before, got %v", o)
	}
	expectOnly(t, traceAll(t, tr, fromPod(clientPort, 42003, netip.MustParseAddr("10.96.0.20"), 80)), ep1IP)
}
