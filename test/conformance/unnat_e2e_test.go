//go:build e2e

package conformance

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
	"github.com/antrea-proxy/antrea-proxy/test/lab"
)

// The lab of TestNoUnNATEntryOfAnUnchangedTuple: one client, one endpoint, one ClusterIP.
const (
	unnatClient    = "10.10.0.10"
	unnatEndpoint  = "10.10.0.11"
	unnatClusterIP = "10.96.0.10"
	unnatEchoPort  = 8080
)

// TestNoUnNATEntryOfAnUnchangedTuple pins the cause of the ovs-vswitchd 3.1.0 aborts of
// docs/conformance.md ("Measured"), against ovs-vswitchd alone: the pipeline's base flows and
// one ClusterIP on a private netdev bridge. OVS 3.1's userspace conntrack adds, for every
// connection committed with nat, a second entry for the reply direction (the un-NAT entry,
// keyed by the reply tuple). When the nat changed nothing (ConntrackCommit's zero SNAT of a
// connection whose reply tuple was free), that entry has the very tuple of its connection, in
// the same hash chain. Once the connection expired, a lookup of its tuple skips it and finds
// the un-NAT entry, takes it for the reply direction, looks for its connection, finds the
// un-NAT entry again and hands it to conn_update_state(), which asserts (conntrack.c:1063)
// and aborts the daemon. A SYN reusing the port of a closed TCP connection makes that
// deterministic: the ConntrackZone lookup expires the closed connection (a new one starts),
// and the ConntrackCommit that follows in the same pass finds the un-NAT entry. Each case
// checks that ovs-vswitchd is still running after each step.
func TestNoUnNATEntryOfAnUnchangedTuple(t *testing.T) {
	l := lab.New(t)
	client := l.AddHost(t, "client", unnatClient)
	l.AddPod(t, "backend", unnatEndpoint, unnatEchoPort)
	installUnNATLabFlows(t, l)
	ns := &framework.NetNS{Name: client.NS.Name}
	direct := net.JoinHostPort(unnatEndpoint, strconv.Itoa(unnatEchoPort))
	vip := net.JoinHostPort(unnatClusterIP, "80")
	alive := func(t *testing.T, after string) {
		t.Helper()
		if !l.OVS.VSwitchdAlive() {
			t.Fatalf("ovs-vswitchd died after %s: %s", after, vswitchdEmergency(l))
		}
	}

	// The abort before the fix: a connection no Service claimed, closed, then a new one from
	// the same port (the endpoint closed first, so the client may reuse its port at once).
	t.Run("direct-reused-port", func(t *testing.T) {
		first, port, err := echoOnce(ns, 0, direct)
		if err != nil {
			t.Fatalf("first connection to %s: %v", direct, err)
		}
		alive(t, "the first connection")
		second, _, err := echoOnce(ns, port, direct)
		alive(t, "a new connection from the closed one's port "+strconv.Itoa(port))
		if err != nil || second != first {
			t.Fatalf("from port %d to %s again: %q, %v; want %q", port, direct, second, err, first)
		}
	})

	// The reply-tuple clash is still handled: a connection straight to the endpoint from the
	// port of an open ClusterIP connection is committed with nat(src), which moves its port.
	// The ClusterIP connection is then reset (no TIME_WAIT at the endpoint), and one more
	// connection from that port, which expires the first direct one, must not abort either.
	t.Run("direct-after-clusterip", func(t *testing.T) {
		c1, port, err := dialFrom(ns, 0, vip)
		if err != nil {
			t.Fatalf("to %s: %v", vip, err)
		}
		defer c1.Close()
		viaVIP, err := readEcho(c1)
		if err != nil {
			t.Fatalf("reading from %s: %v", vip, err)
		}
		viaDirect, _, err := echoOnce(ns, port, direct)
		alive(t, "the connection straight to the endpoint")
		if err != nil || viaDirect == viaVIP {
			t.Fatalf("from port %d the backend saw %q through %s and %q (%v) directly: want two peers", port, viaVIP, vip, viaDirect, err)
		}
		if err := c1.(*net.TCPConn).SetLinger(0); err != nil {
			t.Fatal(err)
		}
		c1.Close()
		third, _, err := echoOnce(ns, port, direct)
		alive(t, "a third connection from port "+strconv.Itoa(port))
		if err != nil {
			t.Fatalf("from port %d to %s once more: %v", port, direct, err)
		}
		t.Logf("from port %d the backend saw %q through %s, then %q and %q directly", port, viaVIP, vip, viaDirect, third)
	})
}

// installUnNATLabFlows installs the pipeline's base flows and a ClusterIP (TCP port 80) whose
// only endpoint is the lab's backend; peers are the NodeConfig's PeerNodeIPs.
func installUnNATLabFlows(t *testing.T, l *lab.Lab, peers ...netip.Addr) {
	t.Helper()
	node := pipeline.NodeConfig{Round: 1, IPv4: true, NodeName: "lab", PeerNodeIPs: peers}
	var ops []of.Op
	for _, f := range pipeline.BaseFlows(node) {
		ops = append(ops, of.Op{Kind: of.AddFlow, Flow: &f})
	}
	svc := pipeline.ServicePort(node, pipeline.ServicePortInput{GroupID: 1, LocalGroupID: 2,
		Port: model.ServicePort{Name: model.ServicePortName{Port: "tcp", Protocol: model.TCP},
			ClusterIPs: []netip.Addr{netip.MustParseAddr(unnatClusterIP)}, Port: 80, Protocol: model.TCP},
		Endpoints: []model.Endpoint{{IP: netip.MustParseAddr(unnatEndpoint), Port: unnatEchoPort,
			NodeName: "lab", Local: true, Ready: true, Serving: true}}})
	for _, g := range svc.Groups {
		ops = append(ops, of.Op{Kind: of.AddGroup, Group: g})
	}
	for _, f := range append(svc.Flows, svc.EndpointFlows...) {
		ops = append(ops, of.Op{Kind: of.AddFlow, Flow: &f})
	}
	if err := l.OF.Apply(context.Background(), ops); err != nil {
		t.Fatalf("installing the pipeline's flows: %v", err)
	}
}

// dialFrom is dialOnce from the client's TCP port (0: any) to addr; it returns the open connection
// and its local port. A given port may still belong to the
// client's side of the previous connection for a moment (LAST_ACK, until the server's last ACK
// arrives): the connect is retried while the kernel says the address is in use.
func dialFrom(ns *framework.NetNS, port int, addr string) (net.Conn, int, error) {
	deadline := time.Now().Add(clashAnswerWait)
	for {
		c, err := dialOnce(ns, port, addr)
		if err == nil {
			return c, c.LocalAddr().(*net.TCPAddr).Port, nil
		}
		if !errors.Is(err, syscall.EADDRNOTAVAIL) || time.Now().After(deadline) {
			return nil, port, err
		}
		time.Sleep(20 * time.Millisecond) // polling the kernel's socket state
	}
}

// readEcho reads the echo server's answer line from c and waits for the server to close its
// side, so that the client, closing second, keeps no TIME_WAIT and may reuse its port at once.
func readEcho(c net.Conn) (string, error) {
	_ = c.SetDeadline(time.Now().Add(clashAnswerWait))
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	if _, err := r.ReadByte(); err != io.EOF {
		return "", fmt.Errorf("after the answer %q: want the server's close, got %v", line, err)
	}
	return strings.TrimSpace(line), nil
}

// echoOnce is one echo exchange from the client's TCP port (0: any) to addr, closed by the
// client last; it returns the answer and the port used.
func echoOnce(ns *framework.NetNS, port int, addr string) (string, int, error) {
	c, port, err := dialFrom(ns, port, addr)
	if err != nil {
		return "", port, err
	}
	defer c.Close()
	line, err := readEcho(c)
	return line, port, err
}

// vswitchdEmergency returns the EMER lines of the lab's ovs-vswitchd log (an assertion's).
func vswitchdEmergency(l *lab.Lab) string {
	b, err := os.ReadFile(filepath.Join(l.OVS.RunDir, "ovs-vswitchd.log"))
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "|EMER|") {
			out = append(out, line)
		}
	}
	if len(out) == 0 {
		return "no EMER line in its log"
	}
	return strings.Join(out, "; ")
}
