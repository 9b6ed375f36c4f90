//go:build e2e

package conformance

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// timeWaitLen is how long Linux keeps a TCP socket in TIME_WAIT (TCP_TIMEWAIT_LEN, 60 s): the
// echo servers close first, so they hold the connection's tuple that long.
const timeWaitLen = 60

// TestClosedConnectionOutlivesTimeWait pins what the rest of the antrea-lossy rule of
// docs/conformance.md was. OVS's userspace conntrack forgot a closed TCP connection after 30 s
// by default, while the endpoint, which closed first, keeps it in TIME_WAIT for 60 s. A later
// connection from the same client port that DNATs (or, from another node, commits) to the same
// endpoint then kept its port, since no entry held that reply tuple any more; the endpoint
// answered its SYN from TIME_WAIT with a challenge ACK, OVS conntrack dropped the client's
// reset as invalid, and the connection never opened. Behind kube-proxy the kernel keeps closed
// connections for 120 s, so its NAT moves the port. The agent now gives its conntrack zones a
// 120 s timeout for closed connections (ovsdb.EnsureZoneTimeouts): each case closes one
// connection, checks that every node on its path still tracks it for longer than TIME_WAIT
// lasts, and that a connection from the same port to another Service of the endpoint is
// answered from another port, once per backend placement.
func TestClosedConnectionOutlivesTimeWait(t *testing.T) {
	c := startConntrackSandbox(t, "timewait", echoPodOn{"local", 0}, echoPodOn{"remote", 1}, echoPodOn{"client", 0})
	n1, n2 := c.Nodes[0], c.Nodes[1]
	client := c.pods[2]
	for _, b := range c.pods[:2] {
		name := b.Name
		t.Run(name, func(t *testing.T) {
			vips := make([]string, 2)
			for i := range vips {
				svc := c.createService(t, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: fmt.Sprintf("%s-%d", name, i)},
					Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name}, Ports: []corev1.ServicePort{
						{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(framework.EchoPort)}}}})
				vips[i] = net.JoinHostPort(svc.Spec.ClusterIP, "80")
			}
			var port int
			var first string
			framework.WaitFor(t, time.Minute, "the first ClusterIP to answer", func(context.Context) (bool, string, error) {
				reply, p, err := tcpEchoFrom(c.clientNS, 0, vips[0])
				port, first = p, reply
				return err == nil && strings.HasPrefix(reply, name+" "), fmt.Sprintf("%q %v", reply, err), nil
			})
			// The side that closed first (usually the echo server, which closes after its
			// answer) holds the connection in TIME_WAIT; every conntrack on the way must
			// remember it at least as long.
			vip, _, _ := net.SplitHostPort(vips[0])
			checkClosedTimeout(t, n1, fmt.Sprintf("src=%s,dst=%s,sport=%d,", client.Status.PodIP, vip, port))
			if name == "remote" {
				checkClosedTimeout(t, n2, fmt.Sprintf("src=%s,dst=%s,sport=%d,", client.Status.PodIP, b.Status.PodIP, port))
			}
			second, _, err := tcpEchoFrom(c.clientNS, port, vips[1])
			if err != nil {
				t.Fatalf("from port %d to %s after the same port's closed connection to %s: %v", port, vips[1], vips[0], err)
			}
			if !strings.HasPrefix(second, name+" ") || second == first {
				t.Fatalf("from port %d: the backend saw %q through %s and then %q through %s, want %s twice, from two ports", port, first, vips[0], second, vips[1], name)
			}
		})
	}
}

// closedEntry matches the remaining timeout and the state of a conntrack entry of
// `ovs-appctl dpctl/dump-conntrack -s`.
var closedEntry = regexp.MustCompile(`timeout=(\d+),.*protoinfo=\(state=([A-Z_0-9]+)\)`)

// checkClosedTimeout waits until node's OVS conntrack (zone 65520) holds the connection whose
// original direction contains orig as closed, and fails unless it is kept for longer than
// TIME_WAIT lasts.
func checkClosedTimeout(t *testing.T, node *framework.Node, orig string) {
	t.Helper()
	var timeout int
	framework.WaitFor(t, 10*time.Second, node.Name+": the closed connection "+orig+" in conntrack", func(context.Context) (bool, string, error) {
		out, err := node.OVS.Appctl("dpctl/dump-conntrack", "-s", "zone=65520")
		if err != nil {
			return false, "", err
		}
		for _, line := range strings.Split(out, "\n") {
			if !strings.Contains(line, "orig=("+orig) {
				continue
			}
			m := closedEntry.FindStringSubmatch(line)
			if m == nil || m[2] != "TIME_WAIT" {
				return false, line, nil
			}
			timeout, err = strconv.Atoi(m[1])
			return err == nil, line, err
		}
		return false, "no such entry", nil
	})
	if timeout <= timeWaitLen {
		t.Fatalf("%s: OVS conntrack forgets the closed connection %s in %d s, before the endpoint's TIME_WAIT (%d s) ends", node.Name, orig, timeout, timeWaitLen)
	}
}

// tcpEchoFrom connects from the client's TCP port (0: any) to addr, reads the echo line and
// closes, and returns the line and the port used. The socket has SO_REUSEADDR, so that the port
// can be bound again while the client's side of an earlier connection from it is in TIME_WAIT
// (the client may send its FIN before the server's arrives).
func tcpEchoFrom(ns *framework.NetNS, port int, addr string) (string, int, error) {
	c, err := dialOnce(ns, port, addr)
	if err != nil {
		return "", port, err
	}
	defer c.Close()
	used := c.LocalAddr().(*net.TCPAddr).Port
	_ = c.SetDeadline(time.Now().Add(clashAnswerWait))
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), used, err
}

// dialOnce connects from the namespace's TCP port (0: any; SO_REUSEADDR) to addr.
func dialOnce(ns *framework.NetNS, port int, addr string) (net.Conn, error) {
	var c net.Conn
	err := ns.Do(func() error {
		var err error
		d := net.Dialer{LocalAddr: &net.TCPAddr{Port: port}, Timeout: clashAnswerWait, Control: reuseAddr}
		c, err = d.Dial("tcp", addr)
		return err
	})
	return c, err
}

// reuseAddr sets SO_REUSEADDR on a socket before it is bound.
func reuseAddr(_, _ string, rc syscall.RawConn) error {
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
	}); err != nil {
		return err
	}
	return serr
}
