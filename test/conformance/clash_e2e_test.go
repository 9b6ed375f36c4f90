//go:build e2e

package conformance

import (
	"context"
	"errors"
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

// clashAnswerWait is how long one echo of TestReplyTupleClash resends before it counts as
// unanswered: an answer takes milliseconds, a clash loses every resend.
const clashAnswerWait = 3 * time.Second

// TestReplyTupleClash reproduces what most of the antrea-lossy rule of docs/conformance.md was:
// a client sends from one source port first to a ClusterIP (conntrack DNATs it to the
// backend), then from the same port straight to that backend. The second connection's reply
// tuple (backend -> client:port) is the one the first connection's reply already has. The
// kernel's conntrack gives every new connection a null NAT binding that moves the source port
// when its reply tuple is taken, so kube-proxy nodes answer both; OVS conntrack does that only
// for connections committed with a nat action, and without it the backend's answer to the
// second connection is un-DNATed as if it belonged to the first one, for as long as the first
// one is remembered. In the suite the clash happened by chance (two clients or the node's
// masquerade picking the same port towards one backend). Each case here forces it, once per
// backend placement.
func TestReplyTupleClash(t *testing.T) {
	c := startConntrackSandbox(t, "clash", echoPodOn{"local", 0}, echoPodOn{"remote", 1}, echoPodOn{"client", 0})
	for _, b := range c.pods[:2] {
		name := b.Name
		t.Run(name, func(t *testing.T) {
			svc := c.createService(t, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: name},
				Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name}, Ports: []corev1.ServicePort{
					{Name: "udp", Protocol: corev1.ProtocolUDP, Port: 80, TargetPort: intstr.FromInt32(framework.EchoPort)}}}})
			vip := net.JoinHostPort(svc.Spec.ClusterIP, "80")
			direct := net.JoinHostPort(b.Status.PodIP, strconv.Itoa(framework.EchoPort))
			// The Service answers once the agent's flows are in; from then on the clash is
			// deterministic.
			var port int
			var first string
			framework.WaitFor(t, time.Minute, "the ClusterIP to answer", func(context.Context) (bool, string, error) {
				reply, p, err := udpEchoFrom(c.clientNS, 0, vip)
				port, first = p, reply
				return err == nil && strings.HasPrefix(reply, name+" "), fmt.Sprintf("%q %v", reply, err), nil
			})
			second, _, err := udpEchoFrom(c.clientNS, port, direct)
			if err != nil {
				t.Fatalf("from port %d to %s after the same port's connection to %s: %v", port, direct, vip, err)
			}
			if !strings.HasPrefix(second, name+" ") {
				t.Fatalf("from port %d to %s: reply %q, want one from %s", port, direct, second, name)
			}
			// Both connections are still tracked: the backend must see two different peers, as
			// behind kube-proxy. Seeing one twice is what makes a TCP backend answer the second
			// connection's SYN from the first one's TIME_WAIT, so that it never gets an answer.
			if second == first {
				t.Fatalf("from port %d the backend saw the same peer through %s and directly (%q): the second connection's reply tuple clashes with the first one's", port, vip, first)
			}
		})
	}
}

// udpEchoFrom sends echo datagrams from the client's UDP port (0: any) to addr every 300 ms
// until one is answered or clashAnswerWait passes, and returns the answer and the port used.
func udpEchoFrom(ns *framework.NetNS, port int, addr string) (string, int, error) {
	raddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return "", 0, err
	}
	var c *net.UDPConn
	if err := ns.Do(func() error {
		var err error
		c, err = net.DialUDP("udp", &net.UDPAddr{Port: port}, raddr)
		return err
	}); err != nil {
		return "", 0, err
	}
	defer c.Close()
	used := c.LocalAddr().(*net.UDPAddr).Port
	buf := make([]byte, 2048)
	deadline := time.Now().Add(clashAnswerWait)
	for time.Now().Before(deadline) {
		if _, err := c.Write([]byte("ping\n")); err != nil {
			return "", used, err
		}
		_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		n, err := c.Read(buf)
		if err == nil {
			return strings.TrimSpace(string(buf[:n])), used, nil
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			return "", used, err
		}
	}
	return "", used, fmt.Errorf("no answer from %s within %v", addr, clashAnswerWait)
}
