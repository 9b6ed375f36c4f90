//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiv1"
	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// streamInterval is how often a UDP stream sends a datagram.
const streamInterval = 100 * time.Millisecond

// udpStream is one UDP flow (one socket, so one source port) that sends "seq <n>" every
// streamInterval and records which datagrams the echo servers answered, and by whom.
type udpStream struct {
	name string
	conn net.Conn

	mu      sync.Mutex
	sent    []time.Time          // by sequence number
	answers map[int]streamAnswer // by sequence number
}

// streamAnswer is the first answer to one datagram.
type streamAnswer struct {
	server string
	at     time.Time
}

func startUDPStream(ctx context.Context, t *testing.T, name string, from *framework.NetNS, dst string) *udpStream {
	t.Helper()
	conn, err := from.Dial(ctx, "udp", dst)
	require.NoError(t, err)
	s := &udpStream{name: name + " " + conn.LocalAddr().String() + " -> " + dst, conn: conn, answers: map[int]streamAnswer{}}
	done := make(chan struct{})
	go s.read()
	go s.send(done)
	t.Cleanup(func() { close(done); conn.Close() })
	return s
}

func (s *udpStream) send(done <-chan struct{}) {
	tick := time.NewTicker(streamInterval)
	defer tick.Stop()
	for {
		s.mu.Lock()
		seq := len(s.sent)
		s.sent = append(s.sent, time.Now())
		s.mu.Unlock()
		_, _ = s.conn.Write([]byte("seq " + strconv.Itoa(seq) + "\n"))
		select {
		case <-done:
			return
		case <-tick.C:
		}
	}
}

func (s *udpStream) read() {
	buf := make([]byte, 512)
	for {
		n, err := s.conn.Read(buf)
		if err != nil {
			return // closed (the socket has no deadline)
		}
		f := strings.Fields(string(buf[:n]))
		if len(f) != 3 {
			continue
		}
		seq, err := strconv.Atoi(f[2])
		if err != nil {
			continue
		}
		s.mu.Lock()
		if _, ok := s.answers[seq]; !ok {
			s.answers[seq] = streamAnswer{server: f[0], at: time.Now()}
		}
		s.mu.Unlock()
	}
}

// tally summarizes the datagrams sent in [from, to), at most limit of them (the first ones; 0:
// all): how many, how many got no answer, and the servers that answered the others.
func (s *udpStream) tally(from, to time.Time, limit int) (sent, lost int, servers map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	servers = map[string]int{}
	for seq, at := range s.sent {
		if at.Before(from) || !at.Before(to) {
			continue
		}
		if limit > 0 && sent == limit {
			break
		}
		sent++
		if a, ok := s.answers[seq]; ok {
			servers[a.server]++
		} else {
			lost++
		}
	}
	return sent, lost, servers
}

// firstAnswer returns the first answer received at or after since from a server other than
// not, and whether there was one.
func (s *udpStream) firstAnswer(since time.Time, not string) (streamAnswer, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var first streamAnswer
	found := false
	for _, a := range s.answers {
		if a.server != not && !a.at.Before(since) && (!found || a.at.Before(first.at)) {
			first, found = a, true
		}
	}
	return first, found
}

// lbIP6 is the IPv6 LoadBalancer IP of the test's Service; the test routes its /64 from the
// external client to node1, as VIPRange is for IPv4.
var lbIP6 = netip.MustParseAddr("fd00:78::60")

// TestUDPStreamsAcrossAgentRestart: UDP flows that send a datagram every 100 ms to a dual-stack
// Service through its ClusterIPs and node1's NodePorts (from a pod on node1) and its
// LoadBalancer IPs (from outside, through node1), both families, lose no datagram and keep
// their endpoint once node1's agent is back from a restart during which the Service was scaled
// up; with the agent running, the flows of an endpoint that goes away get answers from another
// endpoint within a second of node1 programming the change, and the other flows lose nothing.
func TestUDPStreamsAcrossAgentRestart(t *testing.T) {
	sb := framework.StartSandbox(t, framework.SandboxOptions{DualStack: true, Agent: framework.AgentOptions{ProxyLoadBalancerIPs: true}})
	ctx := context.Background()
	const ns = "udpstream"
	n1, n2 := sb.Nodes[0], sb.Nodes[1]
	clientNS, svc := startUDPDNS(t, sb, ns, corev1.ServiceTypeLoadBalancer)
	lbIP4 := netip.MustParseAddr("172.18.0.60")
	require.True(t, framework.VIPRange.Contains(lbIP4))
	require.NoError(t, sb.SetLBIngresses(ctx, ns, "dns", corev1.LoadBalancerIPModeVIP, lbIP4, lbIP6))
	_, err := sb.Net.Client.Exec("ip", "-6", "route", "replace", netip.PrefixFrom(lbIP6, 64).Masked().String(), "via", n1.IP6.String())
	require.NoError(t, err)
	for _, ip := range []netip.Addr{lbIP4, lbIP6} {
		require.NoError(t, sb.WaitLBApplied(ctx, ns, "dns", ip, true))
	}
	require.NoError(t, sb.WaitProgrammed(ctx, ns, "dns", "with 2 endpoints", framework.HasEndpoints(2)))
	np := nodePortOf(t, svc, "udp")

	frontends := []struct {
		name string
		from *framework.NetNS
		dst  string
	}{
		{"ClusterIP", clientNS, hostPort(clusterIPOf(t, svc, false), 80)}, {"ClusterIP", clientNS, hostPort(clusterIPOf(t, svc, true), 80)},
		{"NodePort", clientNS, hostPort(n1.IP.String(), np)}, {"NodePort", clientNS, hostPort(n1.IP6.String(), np)},
		{"LB IP", sb.Net.Client, hostPort(lbIP4.String(), 80)}, {"LB IP", sb.Net.Client, hostPort(lbIP6.String(), 80)},
	}
	var streams []*udpStream
	pinned := map[*udpStream]string{}
	for _, fe := range frontends {
		for i := 0; i < 3; i++ {
			s := startUDPStream(ctx, t, fe.name, fe.from, fe.dst)
			framework.WaitFor(t, 10*time.Second, "an answer to "+s.name, func(context.Context) (bool, string, error) {
				a, ok := s.firstAnswer(time.Time{}, "")
				pinned[s] = a.server
				return ok, "", nil
			})
			streams = append(streams, s)
		}
	}
	// Every flow is answered by one endpoint before anything happens.
	settle(t, streams, pinned, time.Now(), "before the restart")

	// Scaled up while node1's agent is down.
	killed := time.Now()
	n1.KillAgent(t)
	_, err = sb.RunPods(ctx, framework.EchoPod(ns, "dns-3", n2, udpDNSLabels), framework.EchoPod(ns, "dns-4", n2, udpDNSLabels))
	require.NoError(t, err)
	require.NoError(t, n1.StartAgentAgain(t, time.Minute))
	waitEachNode(t, sb, ns, "dns", "with 4 endpoints", everyRow(func(_ *framework.Node, r apiv1.ServicePort) (bool, string) {
		return r.Endpoints.Total == 4, fmt.Sprintf("%d endpoints", r.Endpoints.Total)
	}))
	back := time.Now()
	settle(t, streams, pinned, back, "after node1's agent restarted (2 endpoints added while it was down)")
	lostDuring := 0
	for _, s := range streams {
		_, lost, _ := s.tally(killed, back, 0)
		lostDuring += lost
	}
	t.Logf("%d UDP flows lost %d datagrams while node1's agent was down and syncing again (%v)", len(streams), lostDuring, back.Sub(killed).Round(100*time.Millisecond))

	// With the agent running, the endpoint with the most flows goes away.
	byServer := map[string]int{}
	for _, srv := range pinned {
		byServer[srv]++
	}
	gone := "dns-1"
	if byServer["dns-2"] > byServer["dns-1"] {
		gone = "dns-2"
	}
	require.NotZero(t, byServer[gone], "no flow is on %s or the other first endpoint: the test proves nothing", gone)
	deleted := time.Now()
	require.NoError(t, sb.DeletePod(ctx, ns, gone))
	programmed := waitBuckets(t, n1, ns, "dns", 3)
	worst := time.Duration(0)
	moved := map[*udpStream]bool{}
	for _, s := range streams {
		if pinned[s] != gone {
			continue
		}
		moved[s] = true
		framework.WaitFor(t, 10*time.Second, s.name+" to be answered by another endpoint than "+gone, func(context.Context) (bool, string, error) {
			_, ok := s.firstAnswer(deleted, gone)
			return ok, "", nil
		})
		a, _ := s.firstAnswer(deleted, gone)
		took := a.at.Sub(programmed)
		worst = max(worst, took)
		require.LessOrEqual(t, took, time.Second, "%s moved from %s to %s %v after node1 programmed the change, want within 1s", s.name, gone, a.server, took)
		pinned[s] = a.server
	}
	settled := time.Now()
	settle(t, streams, pinned, settled, "after "+gone+" went away")
	for _, s := range streams {
		if sent, lost, servers := s.tally(deleted, settled, 0); !moved[s] && (lost > 0 || len(servers) != 1) {
			t.Errorf("%s: %d of %d datagrams lost, answered by %v while %s went away", s.name, lost, sent, servers, gone)
		}
	}
	t.Logf("%d UDP flows (ClusterIP, NodePort, LB IP; IPv4 and IPv6) kept their endpoints with no datagram lost after node1's agent restarted; the %d on %s moved at most %v after node1 programmed its removal (%v after the Pod's deletion began)",
		len(streams), byServer[gone], gone, worst.Round(10*time.Millisecond), programmed.Sub(deleted).Round(10*time.Millisecond))
}

// settleCount is how many datagrams of every stream settle checks.
const settleCount = 10

// settle waits until every stream sent settleCount datagrams at or after since and requires that
// each of them was answered, by the stream's pinned endpoint.
func settle(t *testing.T, streams []*udpStream, pinned map[*udpStream]string, since time.Time, when string) {
	t.Helper()
	framework.WaitFor(t, 10*time.Second, fmt.Sprintf("answers to %d datagrams of every flow sent %s", settleCount, when), func(context.Context) (bool, string, error) {
		for _, s := range streams {
			sent, unanswered, servers := s.tally(since, time.Now().Add(time.Hour), settleCount)
			if sent < settleCount || unanswered > 0 {
				return false, fmt.Sprintf("%s: %d of %d datagrams unanswered", s.name, unanswered, sent), nil
			}
			if len(servers) != 1 || servers[pinned[s]] == 0 {
				return false, fmt.Sprintf("%s: answered by %v, want %s only", s.name, servers, pinned[s]), nil
			}
		}
		return true, "", nil
	})
}

// waitBuckets polls node's agent every 20 ms until every UDP row of the Service selects n
// endpoints and returns when it first saw that (at most 20 ms and one API call late).
func waitBuckets(t *testing.T, node *framework.Node, namespace, name string, n int) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	last := "no answer yet"
	for {
		m, err := node.API.ServiceMap(ctx, namespace, name)
		if err == nil {
			rows, ok := 0, true
			for _, r := range m.Items {
				if r.Name == name && r.Protocol == "UDP" {
					rows++
					ok = ok && r.Buckets == n
					last = fmt.Sprintf("port %s: %d buckets", r.PortName, r.Buckets)
				}
			}
			if rows > 0 && ok {
				return time.Now()
			}
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s's agent never programmed %s/%s's UDP port with %d endpoints: %s", node.Name, namespace, name, n, last)
		case <-tick.C:
		}
	}
}
