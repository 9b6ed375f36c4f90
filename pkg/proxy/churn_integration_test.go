package proxy

import (
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/antrea-proxy/antrea-proxy/test/ovssandbox"
)

// Churn shape: small pools, so that names, addresses, NodePorts and endpoints are reused and
// collide (shared endpoint flows, contested ExternalIP/LB-IP matches, group IDs reused).
const (
	churnServices  = 24 // Service names svc00..svc23
	churnSlicesPer = 2  // EndpointSlices <svc>-0 and <svc>-1
	churnEndpoints = 12 // endpoint addresses 10.10.0.1..12 shared by every Service
)

// churnPort is one port a Service may have (the pool).
var churnPortPool = []v1.ServicePort{
	{Name: "http", Port: 80, Protocol: v1.ProtocolTCP},
	{Name: "https", Port: 443, Protocol: v1.ProtocolTCP},
	{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP},
	{Name: "alt", Port: 8080, Protocol: v1.ProtocolTCP},
	{Name: "sig", Port: 3868, Protocol: v1.ProtocolSCTP},
}

// churnHarness is what the churn feeds: informer events and a sync.
type churnHarness interface {
	addService(*v1.Service)
	updateService(old, cur *v1.Service)
	deleteService(*v1.Service)
	addSlice(*discovery.EndpointSlice)
	updateSlice(old, cur *discovery.EndpointSlice)
	deleteSlice(*discovery.EndpointSlice)
	sync()
}

func (h *harness) deleteSlice(s *discovery.EndpointSlice) {
	h.p.Tracker().Endpoints.OnEndpointSliceDelete(s)
}

// churn is the API state the random operations evolve; every harness sees the same events.
// Objects handed to a harness are never modified afterwards (like an informer cache's).
type churn struct {
	rng     *rand.Rand
	targets []churnHarness
	svcs    map[string]*v1.Service
	slices  map[string]*discovery.EndpointSlice
	created int
	ops     map[string]int // operations done, by kind (logged)
}

func newChurn(seed int64, targets ...churnHarness) *churn {
	return &churn{rng: rand.New(rand.NewSource(seed)), targets: targets,
		svcs: map[string]*v1.Service{}, slices: map[string]*discovery.EndpointSlice{}, ops: map[string]int{}}
}

func (c *churn) pick(n int) int          { return c.rng.Intn(n) }
func (c *churn) chance(percent int) bool { return c.rng.Intn(100) < percent }
func churnSvcName(i int) string          { return fmt.Sprintf("svc%02d", i) }
func churnSliceName(i, k int) string     { return fmt.Sprintf("svc%02d-%d", i, k) }
func churnNodePort(i, port int) int32    { return int32(30000 + i*8 + port) }
func churnEndpointNode(k int) string {
	if k%3 == 0 {
		return testNode
	}
	return "node-b"
}

// step does one random operation.
func (c *churn) step() {
	i := c.pick(churnServices)
	name := churnSvcName(i)
	switch r := c.pick(100); {
	case r < 15:
		if old := c.svcs[name]; old != nil {
			c.deleteService(old)
		} else {
			c.addService(i)
		}
	case r < 55:
		if old := c.svcs[name]; old != nil {
			c.updateService(i, old)
		} else {
			c.addService(i)
		}
	default:
		c.sliceOp(i)
	}
}

func (c *churn) addService(i int) {
	c.created++
	name := churnSvcName(i)
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: name, UID: types.UID(fmt.Sprintf("uid-%d", c.created)),
			CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(c.created) * time.Second))},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: fmt.Sprintf("10.96.1.%d", i+1)},
	}
	if c.chance(4) {
		svc.Spec.ClusterIP = v1.ClusterIPNone // headless: skipped
	}
	svc.Spec.ClusterIPs = []string{svc.Spec.ClusterIP}
	svc.Spec.Ports = []v1.ServicePort{c.port(c.pick(len(churnPortPool)))}
	for n := c.pick(3); n > 0; n-- {
		c.mutate(i, svc)
	}
	c.svcs[name] = svc
	c.ops["service-add"]++
	for _, h := range c.targets {
		h.addService(svc)
	}
}

func (c *churn) port(k int) v1.ServicePort {
	p := churnPortPool[k]
	p.TargetPort = intstr.FromInt32(p.Port + 8000)
	return p
}

func (c *churn) updateService(i int, old *v1.Service) {
	svc := old.DeepCopy()
	c.mutate(i, svc)
	c.svcs[svc.Name] = svc
	c.ops["service-update"]++
	for _, h := range c.targets {
		h.updateService(old, svc)
	}
}

func (c *churn) deleteService(old *v1.Service) {
	delete(c.svcs, old.Name)
	c.ops["service-delete"]++
	for _, h := range c.targets {
		h.deleteService(old)
	}
}

// mutate changes one aspect of svc, keeping it valid for the API server.
func (c *churn) mutate(i int, svc *v1.Service) {
	s := &svc.Spec
	switch c.pick(9) {
	case 0: // type
		s.Type = []v1.ServiceType{v1.ServiceTypeClusterIP, v1.ServiceTypeNodePort, v1.ServiceTypeLoadBalancer}[c.pick(3)]
	case 1: // add or remove a port
		c.togglePort(s)
	case 2: // load-balancer ingress with ipMode VIP, Proxy or unset
		svc.Status.LoadBalancer.Ingress = nil
		for n := c.pick(3); n > 0; n-- {
			ing := v1.LoadBalancerIngress{IP: fmt.Sprintf("172.18.0.%d", 100+c.pick(4))}
			switch c.pick(3) {
			case 0:
				ing.IPMode = modePtr(v1.LoadBalancerIPModeVIP)
			case 1:
				ing.IPMode = modePtr(v1.LoadBalancerIPModeProxy)
			}
			svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, ing)
		}
	case 3:
		s.ExternalIPs = nil
		for n := c.pick(3); n > 0; n-- {
			s.ExternalIPs = append(s.ExternalIPs, fmt.Sprintf("203.0.113.%d", 1+c.pick(3)))
		}
	case 4:
		s.ExternalTrafficPolicy = []v1.ServiceExternalTrafficPolicy{v1.ServiceExternalTrafficPolicyCluster, v1.ServiceExternalTrafficPolicyLocal}[c.pick(2)]
	case 5:
		p := []v1.ServiceInternalTrafficPolicy{v1.ServiceInternalTrafficPolicyCluster, v1.ServiceInternalTrafficPolicyLocal}[c.pick(2)]
		s.InternalTrafficPolicy = &p
	case 6:
		if c.chance(50) {
			timeout := []int32{10, 600, 10800}[c.pick(3)]
			s.SessionAffinity = v1.ServiceAffinityClientIP
			s.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: &timeout}}
		} else {
			s.SessionAffinity, s.SessionAffinityConfig = v1.ServiceAffinityNone, nil
		}
	case 7:
		s.LoadBalancerSourceRanges = nil
		for n := c.pick(3); n > 0; n-- {
			s.LoadBalancerSourceRanges = append(s.LoadBalancerSourceRanges, []string{"192.0.2.0/24", "198.51.100.7/32", "10.0.0.0/8"}[c.pick(3)])
		}
	case 8: // a port's target port
		k := c.pick(len(s.Ports))
		s.Ports[k].TargetPort = intstr.FromInt32(s.Ports[k].Port + 8000 + int32(c.pick(2)))
	}
	c.fixup(i, svc)
}

func (c *churn) togglePort(s *v1.ServiceSpec) {
	k := c.pick(len(churnPortPool))
	for j, p := range s.Ports {
		if p.Name == churnPortPool[k].Name {
			if len(s.Ports) > 1 {
				s.Ports = append(s.Ports[:j:j], s.Ports[j+1:]...)
			}
			return
		}
	}
	s.Ports = append(s.Ports, c.port(k))
}

// fixup keeps what the API server would: NodePorts exactly on NodePort/LoadBalancer Services,
// traffic policies and LB status only where allowed.
func (c *churn) fixup(i int, svc *v1.Service) {
	s := &svc.Spec
	for j := range s.Ports {
		s.Ports[j].NodePort = 0
		if s.Type != v1.ServiceTypeClusterIP {
			for k, p := range churnPortPool {
				if p.Name == s.Ports[j].Name {
					s.Ports[j].NodePort = churnNodePort(i, k)
				}
			}
		}
	}
	if s.Type == v1.ServiceTypeClusterIP {
		s.ExternalTrafficPolicy = ""
	} else if s.ExternalTrafficPolicy == "" {
		s.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyCluster
	}
	if s.Type != v1.ServiceTypeLoadBalancer {
		svc.Status.LoadBalancer.Ingress = nil
		s.LoadBalancerSourceRanges = nil
	}
	if s.ClusterIP == v1.ClusterIPNone {
		s.Type, s.ExternalTrafficPolicy, s.ExternalIPs = v1.ServiceTypeClusterIP, "", nil
		for j := range s.Ports {
			s.Ports[j].NodePort = 0
		}
	}
}

// sliceOp adds, updates or deletes one of Service i's EndpointSlices. The slice's ports follow
// the Service's current ports (or, for a deleted Service, the whole pool).
func (c *churn) sliceOp(i int) {
	name := churnSliceName(i, c.pick(churnSlicesPer))
	old := c.slices[name]
	if old != nil && c.chance(20) {
		delete(c.slices, name)
		c.ops["slice-delete"]++
		for _, h := range c.targets {
			h.deleteSlice(old)
		}
		return
	}
	s := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns1", Name: name, Labels: map[string]string{discovery.LabelServiceName: churnSvcName(i)}},
		AddressType: discovery.AddressTypeIPv4,
	}
	ports := churnPortPool
	if svc := c.svcs[churnSvcName(i)]; svc != nil {
		ports = svc.Spec.Ports
	}
	for _, p := range ports {
		name, port, proto := p.Name, p.Port+8000, p.Protocol
		if c.chance(10) {
			port++
		}
		s.Ports = append(s.Ports, discovery.EndpointPort{Name: &name, Port: &port, Protocol: &proto})
	}
	for _, k := range c.rng.Perm(churnEndpoints)[:c.pick(5)] {
		s.Endpoints = append(s.Endpoints, c.endpoint(k))
	}
	c.slices[name] = s
	if old == nil {
		c.ops["slice-add"]++
	} else {
		c.ops["slice-update"]++
	}
	for _, h := range c.targets {
		if old == nil {
			h.addSlice(s)
		} else {
			h.updateSlice(old, s)
		}
	}
}

// endpoint returns endpoint k (its node is fixed by k) in a random condition.
func (c *churn) endpoint(k int) discovery.Endpoint {
	node := churnEndpointNode(k)
	var ready, serving, term bool
	switch r := c.pick(10); {
	case r < 6: // ready
		ready, serving = true, true
	case r < 8: // terminating, still serving
		serving, term = true, true
	case r < 9: // terminating
		term = true
	} // else: not ready
	return discovery.Endpoint{
		Addresses:  []string{fmt.Sprintf("10.10.0.%d", k+1)},
		NodeName:   &node,
		Conditions: discovery.EndpointConditions{Ready: &ready, Serving: &serving, Terminating: &term},
	}
}

// replayFinal feeds the final Services and slices to h as a start-up would (adds only).
func (c *churn) replayFinal(h churnHarness) {
	for i := 0; i < churnServices; i++ {
		if svc := c.svcs[churnSvcName(i)]; svc != nil {
			h.addService(svc)
		}
		for k := 0; k < churnSlicesPer; k++ {
			if s := c.slices[churnSliceName(i, k)]; s != nil {
				h.addSlice(s)
			}
		}
	}
}

// churnConfig reads the seed and the operation count (CHURN_SEED, CHURN_OPS) with defaults.
func churnConfig(t *testing.T) (seed int64, ops int) {
	t.Helper()
	seed, ops = 20261129, 2000
	if v := os.Getenv("CHURN_SEED"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("CHURN_SEED=%q: %v", v, err)
		}
		seed = n
	}
	if v := os.Getenv("CHURN_OPS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("CHURN_OPS=%q: %v", v, err)
		}
		ops = n
	}
	return seed, ops
}

// runChurn does total operations of c, syncing every target after 1 to 13 of them (and after
// the last); after each sync it calls check (nil: none). It returns the number of syncs.
func runChurn(t *testing.T, c *churn, total int, check func(op, syncs int)) int {
	t.Helper()
	syncs, next := 0, 1
	for n := 1; n <= total; n++ {
		c.step()
		if next--; next > 0 && n < total {
			continue
		}
		for _, h := range c.targets {
			h.sync()
		}
		syncs++
		if check != nil {
			check(n, syncs)
		}
		next = []int{1, 1, 2, 3, 5, 8, 13}[c.pick(7)]
	}
	return syncs
}

// checkAgainstFresh requires got (the bridge after the churn) to hold what a fresh proxier
// installs for the churn's final objects, group IDs renumbered, and the churned proxier p to
// report the same Service problems as the fresh one.
func checkAgainstFresh(t *testing.T, seed int64, c *churn, opts Options, got groupDumper, p *Proxier) {
	t.Helper()
	fresh := newHarness(t, opts)
	c.replayFinal(fresh)
	fresh.sync()
	if diff := cmp.Diff(groupIndependentDump(t, fresh.bridge), groupIndependentDump(t, got)); diff != "" {
		t.Errorf("seed %d: after the churn the bridge differs from a fresh proxier's (group IDs renumbered; -fresh +churned):\n%s", seed, diff)
	}
	t.Logf("churn: group IDs as numbered differ from a fresh proxier's: %v", canonicalDump(t, fresh.bridge) != canonicalDump(t, got))
	if diff := cmp.Diff(problems(fresh.p), problems(p)); diff != "" {
		t.Errorf("seed %d: after the churn the Services' problems differ from a fresh proxier's (-fresh +churned):\n%s", seed, diff)
	}
}

// TestChurnOnFakeBridge is the churn without OVS (it runs with -short): after 2,000 random
// operations the fake bridge holds what a fresh proxier installs for the final objects.
func TestChurnOnFakeBridge(t *testing.T) {
	for _, seed := range []int64{1, 2, 3} {
		t.Run(strconv.FormatInt(seed, 10), func(t *testing.T) {
			opts := testOptions()
			opts.ProxyLoadBalancerIPs = seed%2 == 0
			h := newHarness(t, opts)
			c := newChurn(seed, h)
			syncs := runChurn(t, c, 2000, nil)
			t.Logf("churn: seed %d: %v in %d syncs; %d flows, %d groups", seed, c.ops, syncs, h.bridge.FlowCount(), h.bridge.GroupCount())
			checkAgainstFresh(t, seed, c, opts, h.bridge, h.p)
		})
	}
}

// TestIntegrationChurn2000 drives a seeded random sequence of Service and EndpointSlice events
// through the proxier's tracker, as the informers would, syncing every 1 to 13 operations,
// against a real OVS bridge and, in lockstep, a second proxier on a FakeBridge. At the end the
// real bridge must hold (a) exactly what a fresh proxier given only the final objects installs
// (group IDs renumbered, see groupIndependentDump) and (b) exactly what the fake-bridge proxier
// holds, group IDs included: no leaked or missing flow or group. Every 50 syncs the real and
// fake bridges are compared too, so a divergence is reported close to where it started.
func TestIntegrationChurn2000(t *testing.T) {
	o := ovssandbox.Start(t, ovssandbox.Options{})
	seed, total := churnConfig(t)
	opts := testOptions()
	opts.ProxyLoadBalancerIPs = seed%2 == 0
	t.Logf("churn: seed %d (CHURN_SEED), %d operations (CHURN_OPS), proxyLoadBalancerIPs=%v", seed, total, opts.ProxyLoadBalancerIPs)
	real := addOVSBridge(t, o, "brchurn")
	onOVS := realHarness(t, opts, real)
	onFake := newHarness(t, opts)
	c := newChurn(seed, onOVS, onFake)
	start := time.Now()
	syncs := runChurn(t, c, total, func(n, syncs int) {
		if syncs%50 != 0 {
			return
		}
		if diff := cmp.Diff(canonicalDump(t, onFake.bridge), canonicalDump(t, real)); diff != "" {
			t.Fatalf("seed %d: after operation %d (sync %d) real OVS differs from the fake bridge (-fake +ovs):\n%s", seed, n, syncs, diff)
		}
	})
	t.Logf("churn: %d operations %v in %d syncs, %v; %d Services and %d slices left, %d flows and %d groups on the bridge",
		total, c.ops, syncs, time.Since(start).Round(time.Millisecond), len(c.svcs), len(c.slices), onFake.bridge.FlowCount(), onFake.bridge.GroupCount())
	logProblems(t, onOVS.p)
	if diff := cmp.Diff(canonicalDump(t, onFake.bridge), canonicalDump(t, real)); diff != "" {
		t.Errorf("seed %d: real OVS differs from the same churn on the fake bridge (-fake +ovs):\n%s", seed, diff)
	}
	checkAgainstFresh(t, seed, c, opts, real, onOVS.p)
}

// problems returns each Service's problem as "reason: message" (none: absent).
func problems(p *Proxier) map[types.NamespacedName]string {
	out := map[types.NamespacedName]string{}
	for _, st := range p.Services() {
		if st.Problem != nil {
			out[st.Name] = st.Problem.Reason + ": " + st.Problem.Message
		}
	}
	return out
}

// logProblems logs the Services the proxier reports a problem for (contested matches are
// expected: the pools are small).
func logProblems(t *testing.T, p *Proxier) {
	t.Helper()
	for _, st := range p.Services() {
		if st.Problem != nil {
			t.Logf("churn: %s: %s: %s", st.Name, st.Problem.Reason, st.Problem.Message)
		}
	}
}
