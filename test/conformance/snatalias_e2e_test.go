//go:build e2e

package conformance

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// TestSNATZoneAlias reproduces the UDP part of what the antrea-lossy rule of
// docs/conformance.md was. A pod on node1 sends from port P to node2's NodePort: node1
// masquerades it to node1:P, node2 DNATs it to its local endpoint and SNATs it, and records the
// SNAT in its SNAT zone under the DNATed tuple node1:P -> endpoint. Then node1's host sends from
// the same port P straight to the endpoint: the very tuple. When node2 looked its SNAT zone up
// with nat for every packet, it SNATed that datagram as the pod's connection, and the endpoint's
// answer went back to the pod; the host never got one. In the suite this happened by chance
// (node1's masquerade picking, for one connection to the endpoint, the port of another to the
// NodePort). Here it is forced.
func TestSNATZoneAlias(t *testing.T) {
	c := startConntrackSandbox(t, "alias", echoPodOn{"backend", 1}, echoPodOn{"client", 0})
	n1, n2 := c.Nodes[0], c.Nodes[1]
	backend := c.pods[0]
	svc := c.createService(t, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: "backend"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "backend"},
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster,
			Ports:                 []corev1.ServicePort{{Name: "udp", Protocol: corev1.ProtocolUDP, Port: 80, TargetPort: intstr.FromInt32(framework.EchoPort)}}}})
	nodePort := net.JoinHostPort(n2.IP.String(), strconv.Itoa(int(svc.Spec.Ports[0].NodePort)))
	var port int
	var first string
	framework.WaitFor(t, time.Minute, "node2's NodePort to answer the pod", func(context.Context) (bool, string, error) {
		reply, p, err := udpEchoFrom(c.clientNS, 0, nodePort)
		port, first = p, reply
		return err == nil && strings.HasPrefix(reply, "backend "), fmt.Sprintf("%q %v", reply, err), nil
	})
	// The alias needs node1's masquerade and node2's SNAT to keep the pod's port, which they do
	// in a quiet sandbox; the endpoint then saw the Service virtual IP with that port.
	if want := "backend " + net.JoinHostPort("169.254.0.253", strconv.Itoa(port)); first != want {
		t.Fatalf("from the pod's port %d through %s the backend saw %q, want %q: the setup does not reproduce the alias", port, nodePort, first, want)
	}
	direct := net.JoinHostPort(backend.Status.PodIP, strconv.Itoa(framework.EchoPort))
	second, _, err := udpEchoFrom(n1.NS, port, direct)
	if err != nil {
		t.Fatalf("from node1's port %d to %s, after the pod's datagrams from port %d to %s: %v (the answer went to the pod's connection)", port, direct, port, nodePort, err)
	}
	// The endpoint sees node1 itself (node2's ConntrackCommit may move the port, as the pod's
	// connection holds the reply tuple endpoint -> node1:P in the Service zone).
	if want := "backend " + n1.IP.String() + ":"; !strings.HasPrefix(second, want) {
		t.Fatalf("from node1's port %d to %s: the backend saw %q, want node1's address %s", port, direct, second, n1.IP)
	}
}
