//go:build e2e

package conformance

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
	"github.com/antrea-proxy/antrea-proxy/test/lab"
)

// reuseTrialCount is how many Service-then-direct pairs each case of
// TestPortReuseAfterClosedServiceConnection runs: the endpoint's TIME_WAIT refuses the direct
// connection's SYN only when its TCP timestamp is older than the Service connection's (the two
// connections have different random timestamp offsets), about every other trial.
const reuseTrialCount = 4

// reusePeer is the lab client whose address the pipeline knows as another node's
// (NodeConfig.PeerNodeIPs).
const reusePeer = "10.10.0.12"

// reuseTrial is what one Service-then-direct pair saw.
type reuseTrial struct {
	port              int
	viaVIP, viaDirect string
	err               error
	took              time.Duration
	// sharedReply is how many Service-zone connections had the reply tuple
	// endpoint -> client:port after the direct connection.
	sharedReply int
}

// TestPortReuseAfterClosedServiceConnection is the last known reply-tuple clash (the
// antrea-lossy rule of docs/conformance.md), against ovs-vswitchd alone (the pipeline's base
// flows and one ClusterIP on a private netdev bridge). A client connects from port p to the
// ClusterIP (DNATed to the endpoint E); the endpoint closes first and keeps the connection in
// TIME_WAIT. Once OVS conntrack holds that connection as closed, the client connects from the
// same port p straight to E. The direct SYN finds the Service connection's record in the SNAT
// zone (CtMarkServiceTuple) closed and expires it (a SYN on a connection both of whose sides
// closed starts a new one), so it is not tagged BitServiceTuple.
//
//   - "unknown-client" pins the gap for clients the pipeline knows nothing of: ConntrackCommit
//     commits the direct connection without nat and its port stays p. The Service zone then
//     holds two connections with the reply tuple E -> client:p, and the endpoint takes the
//     direct connection for the closed one: when the new SYN's timestamp is older, TIME_WAIT
//     answers it with a bare ACK, the client's reset is invalid to OVS conntrack, and the
//     connection does not open while the TIME_WAIT lasts (60 s). Linux conntrack (kube-proxy)
//     moves the port: its null binding sees the reply tuple taken.
//   - "peer-node" is the fix for another node's address, the source of every such clash the
//     suite showed (the Service connection is the other node's connection to this node's
//     NodePort, the direct one a connection from the same address and port that the other node
//     DNATed and masqueraded): the SNAT to its own address with a port range that excludes its
//     port (peerCommitFlows) moves the port, and every direct connection is answered.
func TestPortReuseAfterClosedServiceConnection(t *testing.T) {
	l := lab.New(t)
	clients := map[string]*lab.Host{
		"unknown-client": l.AddHost(t, "client", unnatClient),
		"peer-node":      l.AddHost(t, "peer", reusePeer),
	}
	l.AddPod(t, "backend", unnatEndpoint, unnatEchoPort)
	installUnNATLabFlows(t, l, netip.MustParseAddr(reusePeer))

	t.Run("unknown-client", func(t *testing.T) {
		lost := 0
		for i, tr := range reuseTrials(t, l, clients["unknown-client"]) {
			if tr.err != nil {
				lost++
			} else if tr.viaDirect != tr.viaVIP {
				t.Fatalf("trial %d: the backend saw %q through the ClusterIP and %q directly: the port moved, the gap is closed (update this test and docs/conformance.md)", i, tr.viaVIP, tr.viaDirect)
			}
			if tr.sharedReply != 2 {
				t.Fatalf("trial %d: %d Service-zone connections with the reply tuple to port %d, want 2 (the closed Service connection and the direct one)", i, tr.sharedReply, tr.port)
			}
		}
		t.Logf("%d of %d direct connections got no answer within %v (the endpoint's TIME_WAIT refused their SYN)", lost, reuseTrialCount, clashAnswerWait)
	})
	t.Run("peer-node", func(t *testing.T) {
		for i, tr := range reuseTrials(t, l, clients["peer-node"]) {
			// A SYN the endpoint's TIME_WAIT refused would not be answered within
			// clashAnswerWait at all (the TIME_WAIT lasts 60 s).
			if tr.err != nil {
				t.Fatalf("trial %d from port %d: directly %v after %v: want an answer", i, tr.port, tr.err, tr.took)
			}
			if tr.viaDirect == tr.viaVIP || !strings.HasPrefix(tr.viaDirect, "backend "+reusePeer+":") {
				t.Fatalf("trial %d: the backend saw %q through the ClusterIP and %q directly: want the same address from another port", i, tr.viaVIP, tr.viaDirect)
			}
			if tr.sharedReply != 1 {
				t.Fatalf("trial %d: %d Service-zone connections with the reply tuple to port %d, want 1 (the closed Service connection)", i, tr.sharedReply, tr.port)
			}
		}
		// The abort of TestNoUnNATEntryOfAnUnchangedTuple cannot come back: the moved
		// connection's un-NAT entry never has its own tuple, so a connection reusing the port
		// of a closed direct one is answered and ovs-vswitchd lives.
		ns := &framework.NetNS{Name: clients["peer-node"].NS.Name}
		direct := net.JoinHostPort(unnatEndpoint, strconv.Itoa(unnatEchoPort))
		first, port, err := echoOnce(ns, 0, direct)
		if err != nil {
			t.Fatalf("to %s: %v", direct, err)
		}
		second, _, err := echoOnce(ns, port, direct)
		if !l.OVS.VSwitchdAlive() {
			t.Fatalf("ovs-vswitchd died after a connection from the port of a closed direct one: %s", vswitchdEmergency(l))
		}
		if err != nil || second == first {
			t.Fatalf("from port %d to %s twice: %q, then %q (%v): want two answers from two ports", port, direct, first, second, err)
		}
	})
	if !l.OVS.VSwitchdAlive() {
		t.Fatalf("ovs-vswitchd died: %s", vswitchdEmergency(l))
	}
}

// reuseTrials runs reuseTrialCount Service-then-direct pairs from client.
func reuseTrials(t *testing.T, l *lab.Lab, client *lab.Host) []reuseTrial {
	t.Helper()
	ns := &framework.NetNS{Name: client.NS.Name}
	direct := net.JoinHostPort(unnatEndpoint, strconv.Itoa(unnatEchoPort))
	vip := net.JoinHostPort(unnatClusterIP, "80")
	var out []reuseTrial
	for i := 0; i < reuseTrialCount; i++ {
		var tr reuseTrial
		var err error
		tr.viaVIP, tr.port, err = echoOnce(ns, 0, vip)
		if err != nil {
			t.Fatalf("to %s: %v", vip, err)
		}
		waitClosedInSNATZone(t, l, client.IP, tr.port)
		start := time.Now()
		tr.viaDirect, _, tr.err = echoOnce(ns, tr.port, direct)
		tr.took = time.Since(start)
		if !l.OVS.VSwitchdAlive() {
			t.Fatalf("ovs-vswitchd died: %s", vswitchdEmergency(l))
		}
		tr.sharedReply = serviceZoneEntriesWithReply(t, l, client.IP, tr.port)
		t.Logf("trial %d, port %d: through %s %q; directly %q (%v) after %v; %d Service-zone connections with its reply tuple",
			i, tr.port, vip, tr.viaVIP, tr.viaDirect, tr.err, tr.took.Round(time.Millisecond), tr.sharedReply)
		out = append(out, tr)
	}
	return out
}

// waitClosedInSNATZone waits until the SNAT zone holds the Service connection from the client's
// port as closed (TIME_WAIT): the client may reuse its port while the endpoint's last ACK is
// still on its way, and the record is only expired by a SYN once both sides closed.
func waitClosedInSNATZone(t *testing.T, l *lab.Lab, client string, port int) {
	t.Helper()
	want := "orig=(src=" + client + ",dst=" + unnatEndpoint + ",sport=" + strconv.Itoa(port) + ","
	framework.WaitFor(t, 5*time.Second, "the closed Service connection from port "+strconv.Itoa(port)+" in the SNAT zone", func(context.Context) (bool, string, error) {
		out, err := l.OVS.Appctl("dpctl/dump-conntrack", "zone="+strconv.Itoa(int(pipeline.ZoneSNATV4)))
		if err != nil {
			return false, "", err
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, want) {
				return strings.Contains(line, "state=TIME_WAIT"), line, nil
			}
		}
		return false, "no entry", nil
	})
}

// serviceZoneEntriesWithReply counts the Service zone's connections whose reply tuple is the
// endpoint's answer to the client's port.
func serviceZoneEntriesWithReply(t *testing.T, l *lab.Lab, client string, port int) int {
	t.Helper()
	out, err := l.OVS.Appctl("dpctl/dump-conntrack", "zone="+strconv.Itoa(int(pipeline.ZoneServiceV4)))
	if err != nil {
		t.Fatal(err)
	}
	reply := "reply=(src=" + unnatEndpoint + ",dst=" + client + ",sport=" + strconv.Itoa(unnatEchoPort) + ",dport=" + strconv.Itoa(port) + ")"
	return strings.Count(out, reply)
}
