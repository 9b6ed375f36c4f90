package node

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// TestIntegrationTwoNodes: two nodes, each its own OVS and agent components, routed noEncap over
// an underlay bridge. Pods reach each other across the nodes with their own addresses; a
// ClusterIP whose only endpoint is on the other node works; an external client reaches the
// NodePort on both nodes (through the node without the endpoint too); deleting a Node removes
// its route.
func TestIntegrationTwoNodes(t *testing.T) {
	t.Parallel()
	w := newWorld(t, makeNode("n1", "10.20.0.0/24", underlay+".1"), makeNode("n2", "10.20.1.0/24", underlay+".2"))
	n1, n2 := w.addNode("n1", 1), w.addNode("n2", 2)
	a1, b1 := n1.addPod("a1"), n2.addPod("b1")
	require.Equal(t, "10.20.0.2", a1.ip)
	require.Equal(t, "10.20.1.2", b1.ip)
	w.echo.Start(t, b1.ns, "b1", 8080)
	diag := func() string { return n1.diag() + "\n" + n2.diag() }

	// Routes follow the proxier's first sync (the node network waits for it).
	require.Eventually(t, func() bool {
		return strings.Contains(n1.routes(), "10.20.1.0/24 via 192.168.50.2 dev uplink proto 97")
	}, 10*time.Second, 20*time.Millisecond, "n1 never got its route to n2's podCIDR:\n%s", n1.routes())
	require.Eventually(t, func() bool {
		return strings.Contains(n2.routes(), "10.20.0.0/24 via 192.168.50.1 dev uplink proto 97")
	}, 10*time.Second, 20*time.Millisecond, "n2 never got its route to n1's podCIDR")

	s, c := w.dial(a1.ns, b1.ip+":8080", diag)
	require.Equal(t, "b1", s)
	require.Equal(t, a1.ip, host(c), "pod→pod across nodes keeps the pod's address")

	w.addService(svcSpec{name: "remote", clusterIP: "10.96.0.20", nodePort: 30090}, map[string]string{b1.ip: "n2"})
	n1.waitServices(1)
	n2.waitServices(1)
	s, c = w.dial(a1.ns, "10.96.0.20:80", diag)
	require.Equal(t, "b1", s)
	require.Equal(t, a1.ip, host(c), "pod→ClusterIP with a remote endpoint")

	waitFor(t, 10*time.Second, "NodePort 30090 in both tables", func() bool {
		return strings.Contains(n1.nft(), "30090") && strings.Contains(n2.nft(), "30090")
	})
	for i := 0; i < 3; i++ {
		s, c = w.dial(w.ext, n1.ip+":30090", diag)
		require.Equal(t, "b1", s)
		require.Equal(t, n1.ip, host(c), "external→NodePort of the node without the endpoint: SNATed, then masqueraded to n1")
		s, c = w.dial(w.ext, n2.ip+":30090", diag)
		require.Equal(t, "b1", s)
		require.Equal(t, "169.254.0.253", host(c), "external→NodePort of the endpoint's node")
	}
	require.Contains(t, n1.flows(pipeline.CategoryGateway), "IN_PORT")

	// A deleted Node takes its route with it.
	require.NoError(t, w.cs.CoreV1().Nodes().Delete(context.Background(), "n2", metav1.DeleteOptions{}))
	waitFor(t, 10*time.Second, "n1's route to n2's podCIDR removed", func() bool {
		return !strings.Contains(n1.routes(), "10.20.1.0/24")
	})
	require.NotContains(t, n1.nft(), "10.20.1.0/24", "n2's podCIDR is no longer exempt from masquerade")
}
