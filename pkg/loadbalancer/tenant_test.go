package loadbalancer

import (
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/antrea-proxy/antrea-proxy/pkg/lbapi"
	c "github.com/antrea-proxy/antrea-proxy/pkg/loadbalancer/conditions"
)

// TestSharingNeedsSameNamespace: the allow-shared-ip key alone does not
// let a Service of another namespace join an address; a Service of the
// same namespace with the same key does.
func TestSharingNeedsSameNamespace(t *testing.T) {
	h := newHarness(t, testPools(), readyNode("node-a", nil))
	share := withAnn(lbapi.AnnotationAllowSharedIP, "k")
	want := withAnn(lbapi.AnnotationLoadBalancerIPs, "10.0.0.1")
	h.create(lbService("web", inNamespace("team-a"), share, want))
	require.Equal(t, []string{"10.0.0.1"}, ingressIPs(h.syncIn("team-a", "web")))

	h.create(lbService("steal", inNamespace("team-b"), share, want, withPorts(8080)))
	got := h.syncIn("team-b", "steal")
	require.Empty(t, ingressIPs(got), "a Service of another namespace joined the address")
	cond := servingCond(t, got)
	require.Equal(t, notServing(c.ReasonUnsupported), condSummary{cond.Status, cond.Reason})
	require.Contains(t, cond.Message, "team-a/web")
	require.Contains(t, cond.Message, "allowCrossNamespaceSharing")
	require.Contains(t, h.events(), "Warning AllocationFailed Unsupported: "+cond.Message)

	h.create(lbService("web2", inNamespace("team-a"), share, want, withPorts(8080)))
	require.Equal(t, []string{"10.0.0.1"}, ingressIPs(h.syncIn("team-a", "web2")))
}

// TestSharedAddressAnnouncedForAllSharers: the node announcing a shared
// address is chosen for all its sharers together. A sharer with
// externalTrafficPolicy=Local and no local endpoint never withdraws the
// address of the others.
func TestSharedAddressAnnouncedForAllSharers(t *testing.T) {
	share := withAnn(lbapi.AnnotationAllowSharedIP, "k")
	want := withAnn(lbapi.AnnotationLoadBalancerIPs, "10.0.0.1")
	for _, tc := range []struct {
		name      string
		one, two  func(*v1.Service)
		slices    []string // nodes with an endpoint of "one"
		announced string
	}{{
		name: "two Local sharers, only one has endpoints",
		one:  etpLocal, two: etpLocal, slices: []string{"node-b"},
		announced: "10.0.0.1=node-b",
	}, {
		name: "a Local sharer without endpoints next to a Cluster one",
		one:  func(*v1.Service) {}, two: etpLocal,
		announced: "10.0.0.1=node-a",
	}, {
		name: "a Cluster sharer next to a Local one with endpoints: the Local one's node",
		one:  etpLocal, two: func(*v1.Service) {}, slices: []string{"node-b"},
		announced: "10.0.0.1=node-b",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testPools(), readyNode("node-a", nil), readyNode("node-b", nil),
				endpointSlice("one", "one-x", tc.slices...))
			h.create(lbService("one", share, want, tc.one))
			h.create(lbService("two", share, want, withPorts(8080), tc.two))
			h.sync("one")
			h.sync("two")
			for _, name := range []string{"one", "two", "one", "two"} {
				h.sync(name)
			}
			for _, name := range []string{"one", "two"} {
				svc := h.sync(name)
				require.Equal(t, []string{"10.0.0.1"}, ingressIPs(svc), name)
				require.Equal(t, tc.announced, svc.Annotations[lbapi.AnnotationAnnouncingNode], name)
			}
		})
	}
}

// TestDeletedServiceAddressReserved: a tenant waiting for the address a
// Service requested does not get it when that Service is deleted and
// re-created: the address is kept for the same namespace/name.
func TestDeletedServiceAddressReserved(t *testing.T) {
	h := newHarness(t, testPools(), readyNode("node-a", nil))
	want := withAnn(lbapi.AnnotationLoadBalancerIPs, "10.0.0.1")
	h.create(lbService("web", inNamespace("victim"), want))
	require.Equal(t, []string{"10.0.0.1"}, ingressIPs(h.syncIn("victim", "web")))
	h.create(lbService("grab", inNamespace("tenant"), want))
	require.Empty(t, ingressIPs(h.syncIn("tenant", "grab")))

	h.deleteIn("victim", "web")
	require.Nil(t, h.syncIn("victim", "web"))
	_, body := get(t, NewHTTPHandler(HTTPOptions{Controller: h.ctrl, Metrics: h.ctrl.metrics}), "/metrics")
	require.Contains(t, samples(body, "antrea_controller_lb_reserved_addresses"), `antrea_controller_lb_reserved_addresses{pool="vip"} 1`)
	got := h.syncIn("tenant", "grab")
	require.Empty(t, ingressIPs(got), "the waiting tenant got the address of the deleted Service")
	require.Contains(t, servingCond(t, got).Message, "reserved for victim/web")

	h.create(lbService("web", inNamespace("victim"), want))
	require.Equal(t, []string{"10.0.0.1"}, ingressIPs(h.syncIn("victim", "web")))
}

// TestDeletedServiceAllocatedAddressComesBack: an allocated (not
// requested) address comes back to the re-created Service even when a
// new Service asked for an address in between.
func TestDeletedServiceAllocatedAddressComesBack(t *testing.T) {
	h := newHarness(t, testPools(), readyNode("node-a", nil))
	h.create(lbService("first"))
	require.Equal(t, []string{"10.0.0.1"}, ingressIPs(h.sync("first")))
	h.deleteIn("ns", "first")
	require.Nil(t, h.syncIn("ns", "first"))
	h.create(lbService("other"))
	require.Equal(t, []string{"10.0.0.2"}, ingressIPs(h.sync("other")))
	h.create(lbService("first"))
	require.Equal(t, []string{"10.0.0.1"}, ingressIPs(h.sync("first")))
}
