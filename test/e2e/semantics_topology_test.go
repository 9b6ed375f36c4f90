//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiv1"
	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// Zones of the topology test's nodes: node1 is in zoneA, node2 in zoneB.
const (
	zoneA = "zone-a"
	zoneB = "zone-b"
	// zoneC is a zone no node is in.
	zoneC = "zone-c"
)

// topologyEnv is the workload of TestSemanticsTopology: web-1 on node1 and web-2 on node2 (the
// endpoints), client-1 on node1 and client-2 on node2.
type topologyEnv struct {
	sb     *framework.Sandbox
	ns     string
	n1, n2 *framework.Node
	c1, c2 *framework.NetNS
	web    []*corev1.Pod // web-1, web-2
	// zoneSvc is PreferSameZone's Service, selecting web-1 and web-2.
	zoneSvc *corev1.Service
}

// TestSemanticsTopology proves topology-aware routing on the two-node sandbox with real
// traffic: zone hints written by the endpointslice controller for trafficDistribution
// PreferSameZone keep connections in the client's zone; kube-proxy's all-or-nothing rule (one
// endpoint without hints, or no endpoint for this node's zone, disables the hints); and node
// hints (PreferSameNode), which fall back to zone hints when incomplete.
func TestSemanticsTopology(t *testing.T) {
	sb := framework.StartSandbox(t, framework.SandboxOptions{Agent: framework.AgentOptions{ProxyLoadBalancerIPs: true}})
	ctx := context.Background()
	e := &topologyEnv{sb: sb, ns: "topology", n1: sb.Nodes[0], n2: sb.Nodes[1]}
	// The zones are set before the pods exist, so that the endpointslice controller gives every
	// endpoint its node's zone from the start.
	require.NoError(t, sb.SetNodeZone(ctx, e.n1, zoneA))
	require.NoError(t, sb.SetNodeZone(ctx, e.n2, zoneB))
	require.NoError(t, sb.CreateNamespace(ctx, e.ns))
	pods, err := sb.RunPods(ctx,
		framework.EchoPod(e.ns, "web-1", e.n1, map[string]string{"app": "zweb"}),
		framework.EchoPod(e.ns, "web-2", e.n2, map[string]string{"app": "zweb"}),
		framework.EchoPod(e.ns, "client-1", e.n1, map[string]string{"app": "client"}),
		framework.EchoPod(e.ns, "client-2", e.n2, map[string]string{"app": "client"}),
	)
	require.NoError(t, err)
	e.web = pods[:2]
	e.c1, err = sb.PodNetNS(pods[2])
	require.NoError(t, err)
	e.c2, err = sb.PodNetNS(pods[3])
	require.NoError(t, err)
	t.Run("PreferSameZone", e.preferSameZone)
	t.Run("AllOrNothing", e.allOrNothing)
	t.Run("PreferSameNode", e.preferSameNode)
	t.Run("ControllerPreferSameNodeAndZoneChange", e.controllerSameNode)
}

// preferSameZone: the endpointslice controller hints each endpoint for its node's zone, each
// agent keeps only its zone's endpoint, and every connection of a client lands in its zone.
func (e *topologyEnv) preferSameZone(t *testing.T) {
	svc := echoService(e.ns, "zone", "zweb", corev1.ServiceTypeClusterIP)
	svc.Spec.TrafficDistribution = new(corev1.ServiceTrafficDistributionPreferSameZone)
	svc = createService(t, e.sb, svc)
	e.zoneSvc = svc
	e.waitControllerZoneHints(t, svc)
	e.waitBuckets(t, svc.Name, "with only its zone's endpoint (zone hints)", 2, 1)
	e.requireOnly(t, svc, map[*framework.NetNS]string{e.c1: "web-1", e.c2: "web-2"})
}

// controllerSameNode: the endpointslice controller hints each endpoint of a PreferSameNode
// Service for its node. Then node2 moves to zone-a, the zone of node1: the PreferSameZone
// Service's endpoints are both hinted for zone-a and both agents spread its connections, while
// the PreferSameNode Service keeps every connection on the client's node.
func (e *topologyEnv) controllerSameNode(t *testing.T) {
	require.NotNil(t, e.zoneSvc, "PreferSameZone must have run")
	ctx := context.Background()
	svc := echoService(e.ns, "node", "zweb", corev1.ServiceTypeClusterIP)
	svc.Spec.TrafficDistribution = new(corev1.ServiceTrafficDistributionPreferSameNode)
	svc = createService(t, e.sb, svc)
	e.waitControllerHints(t, svc, "each endpoint's node", func(ep discoveryv1.Endpoint, h *discoveryv1.EndpointHints) bool {
		return h != nil && len(h.ForNodes) == 1 && ep.NodeName != nil && h.ForNodes[0].Name == *ep.NodeName
	})
	e.waitBuckets(t, svc.Name, "with only its node's endpoint (node hints)", 2, 1)
	local := map[*framework.NetNS]string{e.c1: "web-1", e.c2: "web-2"}
	e.requireOnly(t, svc, local)

	require.NoError(t, e.sb.SetNodeZone(ctx, e.n2, zoneA))
	e.waitControllerHints(t, e.zoneSvc, "zone-a on both endpoints (node2 moved to zone-a)", func(_ discoveryv1.Endpoint, h *discoveryv1.EndpointHints) bool {
		return h != nil && len(h.ForZones) == 1 && h.ForZones[0].Name == zoneA
	})
	e.waitBuckets(t, e.zoneSvc.Name, "with both endpoints (both hinted for zone-a, node2 now in zone-a)", 2, 2)
	for _, c := range []*framework.NetNS{e.c1, e.c2} {
		got, _ := countEchoes(t, c, "tcp", hostPort(e.zoneSvc.Spec.ClusterIP, 80), 20)
		require.True(t, got["web-1"] > 0 && got["web-2"] > 0, "PreferSameZone with both nodes in zone-a: 20 connections from %s must reach both endpoints, got %v", c.Name, got)
		t.Logf("PreferSameZone, both nodes in zone-a: tcp from %s: %v", c.Name, got)
	}
	e.waitBuckets(t, svc.Name, "still with only its node's endpoint", 2, 1)
	e.requireOnly(t, svc, local)

	// node2's agent uses its new zone: with web-1 hinted for zone-a and web-2 for zone-b,
	// client-2 now reaches web-1 only.
	e.runSlice(t, "moved", []topoStep{{"web-1 hinted for zone-a, web-2 for zone-b, node2 in zone-a",
		[]topoEndpoint{{e.web[0], []string{zoneA}, nil}, {e.web[1], []string{zoneB}, nil}}, 1,
		map[*framework.NetNS]string{e.c1: "web-1", e.c2: "web-1"}}})
}

// waitControllerHints waits until every endpoint of the Service's slices satisfies ok (the
// endpointslice controller wrote the expected hints), poking the Service every 5s meanwhile (a
// Node's new zone alone does not make the controller sync a PreferSameZone Service).
func (e *topologyEnv) waitControllerHints(t *testing.T, svc *corev1.Service, what string, ok func(discoveryv1.Endpoint, *discoveryv1.EndpointHints) bool) {
	t.Helper()
	start, lastPoke, pokes := time.Now(), time.Time{}, 0
	framework.WaitFor(t, time.Minute, fmt.Sprintf("the endpointslice controller to hint Service %s/%s's endpoints for %s", svc.Namespace, svc.Name, what),
		func(ctx context.Context) (bool, string, error) {
			sls, err := e.sb.ServiceSlices(ctx, svc.Namespace, svc.Name)
			if err != nil {
				return false, err.Error(), nil
			}
			n, good := 0, 0
			var seen []string
			for _, sl := range sls {
				for _, ep := range sl.Endpoints {
					n++
					if ok(ep, ep.Hints) {
						good++
					}
					seen = append(seen, fmt.Sprintf("%v hints %+v", ep.Addresses, ep.Hints))
				}
			}
			if n == 2 && good == n {
				return true, "", nil
			}
			if time.Since(lastPoke) > 5*time.Second {
				lastPoke = time.Now()
				pokes++
				if err := e.pokeService(ctx, svc); err != nil {
					return false, "", err
				}
			}
			return false, fmt.Sprintf("endpoints %v", seen), nil
		})
	t.Logf("Service %s: hints for %s after %v (%d pokes)", svc.Name, what, time.Since(start).Round(time.Millisecond), pokes)
}

// waitControllerZoneHints waits until the endpointslice controller has hinted web-1 for zoneA
// and web-2 for zoneB in the Service's slices. If the slice was computed before the Nodes'
// zones were known, it pokes the Service once so that the controller computes it again.
func (e *topologyEnv) waitControllerZoneHints(t *testing.T, svc *corev1.Service) {
	t.Helper()
	want := map[string]string{e.web[0].Status.PodIP: zoneA, e.web[1].Status.PodIP: zoneB}
	start := time.Now()
	poked := false
	framework.WaitFor(t, time.Minute, "the endpointslice controller to hint web-1 for "+zoneA+" and web-2 for "+zoneB,
		func(ctx context.Context) (bool, string, error) {
			sls, err := e.sb.ServiceSlices(ctx, svc.Namespace, svc.Name)
			if err != nil {
				return false, err.Error(), nil
			}
			got := map[string]string{}
			var seen []string
			for _, sl := range sls {
				for _, ep := range sl.Endpoints {
					zone, hints := "", []string(nil)
					if ep.Zone != nil {
						zone = *ep.Zone
					}
					if ep.Hints != nil {
						for _, z := range ep.Hints.ForZones {
							hints = append(hints, z.Name)
						}
					}
					for _, a := range ep.Addresses {
						seen = append(seen, fmt.Sprintf("%s zone %q hints %v", a, zone, hints))
						if len(hints) == 1 && hints[0] == zone {
							got[a] = zone
						}
					}
				}
			}
			ok := len(got) == len(want)
			for ip, z := range want {
				ok = ok && got[ip] == z
			}
			if !ok && !poked && time.Since(start) > 15*time.Second {
				poked = true
				t.Logf("no zone hints after 15s (%v): poking Service %s/%s", seen, svc.Namespace, svc.Name)
				if err := e.pokeService(ctx, svc); err != nil {
					return false, "", err
				}
			}
			return ok, fmt.Sprintf("endpoints %v", seen), nil
		})
	t.Logf("the endpointslice controller hinted both endpoints for their zones after %v (poked: %v)", time.Since(start).Round(time.Millisecond), poked)
}

// pokeService changes an annotation of the Service so that the endpointslice controller syncs it.
func (e *topologyEnv) pokeService(ctx context.Context, svc *corev1.Service) error {
	cur, err := e.sb.CP.Client.CoreV1().Services(svc.Namespace).Get(ctx, svc.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if cur.Annotations == nil {
		cur.Annotations = map[string]string{}
	}
	cur.Annotations["e2e.antrea-proxy.test/poke"] = time.Now().Format(time.RFC3339Nano)
	_, err = e.sb.CP.Client.CoreV1().Services(svc.Namespace).Update(ctx, cur, metav1.UpdateOptions{})
	return err
}

// topoEndpoint is one endpoint of a test-written EndpointSlice with its hints (nil: none).
type topoEndpoint struct {
	pod   *corev1.Pod
	zones []string
	nodes []string
}

// topoStep is one content of a test-written EndpointSlice and what each agent and client must do
// with it.
type topoStep struct {
	what    string
	eps     []topoEndpoint
	buckets int // on each node
	// only maps each client to the only endpoint its connections may reach; nil: the
	// connections must reach both endpoints.
	only map[*framework.NetNS]string
}

// allOrNothing: with a test-written slice, hints on every endpoint keep the traffic in the
// zone; one endpoint without hints, or no endpoint hinted for a node's zone, spreads it again.
func (e *topologyEnv) allOrNothing(t *testing.T) {
	w1, w2 := e.web[0], e.web[1]
	local := map[*framework.NetNS]string{e.c1: "web-1", e.c2: "web-2"}
	e.runSlice(t, "hints", []topoStep{
		{"web-1 hinted for zone-a, web-2 for zone-b", []topoEndpoint{{w1, []string{zoneA}, nil}, {w2, []string{zoneB}, nil}}, 1, local},
		{"web-1 hinted for zone-a, web-2 without hints", []topoEndpoint{{w1, []string{zoneA}, nil}, {w2, nil, nil}}, 2, nil},
		{"both hinted for zone-c only", []topoEndpoint{{w1, []string{zoneC}, nil}, {w2, []string{zoneC}, nil}}, 2, nil},
		{"hints for zone-a and zone-b again", []topoEndpoint{{w1, []string{zoneA}, nil}, {w2, []string{zoneB}, nil}}, 1, local},
	})
}

// preferSameNode: node hints (as the endpointslice controller writes for PreferSameNode) keep
// every connection on the client's node even when the zone hints allow both endpoints; when one
// endpoint lacks node hints, the zone hints decide.
func (e *topologyEnv) preferSameNode(t *testing.T) {
	w1, w2 := e.web[0], e.web[1]
	both := []string{zoneA, zoneB}
	local := map[*framework.NetNS]string{e.c1: "web-1", e.c2: "web-2"}
	e.runSlice(t, "nodes", []topoStep{
		{"node hints per node, zone hints for both zones", []topoEndpoint{{w1, both, []string{e.n1.Name}}, {w2, both, []string{e.n2.Name}}}, 1, local},
		{"web-2 without node hints, zone hints for both zones", []topoEndpoint{{w1, both, []string{e.n1.Name}}, {w2, both, nil}}, 2, nil},
		{"web-2 without node hints, zone hints per zone", []topoEndpoint{{w1, []string{zoneA}, []string{e.n1.Name}}, {w2, []string{zoneB}, nil}}, 1, local},
	})
}

// runSlice creates the selectorless Service name and writes its EndpointSlice (not managed by
// the endpointslice controller) as each step says, checking each node's buckets and where 20
// TCP and 20 UDP connections of each client land.
func (e *topologyEnv) runSlice(t *testing.T, name string, steps []topoStep) {
	ctx := context.Background()
	svc := createService(t, e.sb, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
			{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(framework.EchoPort)},
			{Name: "udp", Protocol: corev1.ProtocolUDP, Port: 80, TargetPort: intstr.FromInt32(framework.EchoPort)},
		}},
	})
	client := e.sb.CP.Client.DiscoveryV1().EndpointSlices(e.ns)
	var sl *discoveryv1.EndpointSlice
	for _, st := range steps {
		want := e.hintedSlice(name, st.eps)
		var err error
		if sl == nil {
			sl, err = client.Create(ctx, want, metav1.CreateOptions{})
		} else {
			sl.Endpoints = want.Endpoints
			sl, err = client.Update(ctx, sl, metav1.UpdateOptions{})
		}
		require.NoError(t, err, "writing EndpointSlice %s/%s: %s", e.ns, want.Name, st.what)
		e.waitBuckets(t, name, fmt.Sprintf("with %d bucket(s) for %s", st.buckets, st.what), 2, st.buckets)
		if st.only != nil {
			e.requireOnly(t, svc, st.only)
			continue
		}
		for _, c := range []*framework.NetNS{e.c1, e.c2} {
			for _, proto := range []string{"tcp", "udp"} {
				got, _ := countEchoes(t, c, proto, hostPort(svc.Spec.ClusterIP, 80), 20)
				require.True(t, got["web-1"] > 0 && got["web-2"] > 0,
					"%s: 20 %s connections from %s must reach both endpoints (hints disabled), got %v", st.what, proto, c.Name, got)
				t.Logf("%s: %s from %s: %v", st.what, proto, c.Name, got)
			}
		}
	}
}

// hintedSlice is the EndpointSlice of the selectorless Service svc with eps, every endpoint
// ready, in its pod's node's zone.
func (e *topologyEnv) hintedSlice(svc string, eps []topoEndpoint) *discoveryv1.EndpointSlice {
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: svc + "-e2e", Labels: map[string]string{
			discoveryv1.LabelServiceName: svc, discoveryv1.LabelManagedBy: "e2e.antrea-proxy.test",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{
			{Name: new("tcp"), Port: new(int32(framework.EchoPort)), Protocol: new(corev1.ProtocolTCP)},
			{Name: new("udp"), Port: new(int32(framework.EchoPort)), Protocol: new(corev1.ProtocolUDP)},
		},
	}
	for _, ep := range eps {
		zone := zoneA
		if ep.pod.Spec.NodeName == e.n2.Name {
			zone = zoneB
		}
		out := discoveryv1.Endpoint{
			Addresses:  []string{ep.pod.Status.PodIP},
			NodeName:   new(ep.pod.Spec.NodeName),
			Zone:       new(zone),
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: e.ns, Name: ep.pod.Name, UID: ep.pod.UID},
			Conditions: discoveryv1.EndpointConditions{Ready: new(true), Serving: new(true), Terminating: new(false)},
		}
		if ep.zones != nil || ep.nodes != nil {
			out.Hints = &discoveryv1.EndpointHints{}
			for _, z := range ep.zones {
				out.Hints.ForZones = append(out.Hints.ForZones, discoveryv1.ForZone{Name: z})
			}
			for _, n := range ep.nodes {
				out.Hints.ForNodes = append(out.Hints.ForNodes, discoveryv1.ForNode{Name: n})
			}
		}
		sl.Endpoints = append(sl.Endpoints, out)
	}
	return sl
}

// waitBuckets waits until every node programs each port of the Service with ready endpoints and
// buckets of them receiving new connections.
func (e *topologyEnv) waitBuckets(t *testing.T, name, what string, ready, buckets int) {
	t.Helper()
	waitEachNode(t, e.sb, e.ns, name, what, everyRow(func(_ *framework.Node, r apiv1.ServicePort) (bool, string) {
		return r.Endpoints.Ready == ready && r.Buckets == buckets,
			fmt.Sprintf("endpoints %+v, %d buckets; want %d ready, %d buckets", r.Endpoints, r.Buckets, ready, buckets)
	}))
}

// requireOnly checks that 20 TCP and 20 UDP connections of each client to the Service's port 80
// all reach the client's endpoint.
func (e *topologyEnv) requireOnly(t *testing.T, svc *corev1.Service, only map[*framework.NetNS]string) {
	t.Helper()
	addr := hostPort(svc.Spec.ClusterIP, 80)
	for _, c := range []*framework.NetNS{e.c1, e.c2} {
		want, ok := only[c]
		require.True(t, ok, "no expected endpoint for %s", c.Name)
		for _, proto := range []string{"tcp", "udp"} {
			got, _ := countEchoes(t, c, proto, addr, 20)
			require.Equal(t, map[string]int{want: 20}, got, "Service %s: 20 %s connections from %s must all reach %s (topology hints)",
				svc.Name, proto, c.Name, want)
		}
	}
}
