package proxy

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// manyPorts returns n TCP ports named p1..pn, 1001..1000+n.
func manyPorts(n int) svcOpt {
	return func(s *v1.Service) {
		s.Spec.Ports = nil
		for i := 1; i <= n; i++ {
			s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: fmt.Sprintf("p%d", i), Port: int32(1000 + i),
				Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)})
		}
	}
}

// manyExternalIPs sets n externalIPs 192.0.2.1... (and on into 192.0.3.x).
func manyExternalIPs(n int) svcOpt {
	return func(s *v1.Service) {
		s.Spec.ExternalIPs = nil
		for i := 1; i <= n; i++ {
			s.Spec.ExternalIPs = append(s.Spec.ExternalIPs, fmt.Sprintf("192.0.%d.%d", 2+i/256, i%256))
		}
	}
}

func createdAt(sec int) svcOpt {
	return func(s *v1.Service) {
		s.CreationTimestamp = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, sec, 0, time.UTC))
	}
}

// serviceCost is what the proxier installed for nn: its flows (the shared endpoint flows it
// uses included) and its groups' buckets.
func serviceCost(p *Proxier, nn types.NamespacedName) int {
	flows, groups := p.ServiceFlows(nn)
	n := len(flows)
	for _, g := range groups {
		n += len(g.Buckets)
	}
	return n
}

// TestBudgetPerServiceRefusesBeforeBuilding: a Service over the per-Service budget gets no
// flow, no claim and no port status, shows TooManyFlows with one Warning event, and costs its
// claims nothing; another Service keeps syncing. Shrunk under the budget it is programmed;
// grown over it again it loses every flow it had.
func TestBudgetPerServiceRefusesBeforeBuilding(t *testing.T) {
	events := &eventLog{}
	opts := testOptions()
	opts.Events = events
	opts.MaxFlowsPerService = 100
	h := newHarness(t, opts)
	huge := makeService("ns1", "huge", "10.96.0.10", manyPorts(20), manyExternalIPs(30), withETPLocal)
	h.addService(huge)
	h.sync()
	h.addService(makeService("ns1", "small", "10.96.0.11"))
	h.addSlice(makeSlice("ns1", "small", "small-1", 8080, v1.ProtocolTCP, "http", ep{ip: "10.10.1.5", node: testNode, ready: true}))
	h.sync()

	nn := types.NamespacedName{Namespace: "ns1", Name: "huge"}
	st := statusOf(h, "ns1", "huge")
	require.NotNil(t, st)
	require.NotNil(t, st.Problem)
	require.Equal(t, ProblemTooManyFlows, st.Problem.Reason)
	require.Contains(t, st.Problem.Message, "more than the per-Service budget of 100")
	require.Empty(t, st.Ports)
	require.Empty(t, h.p.claims.claimed(nn), "a refused Service claims nothing")
	require.Zero(t, serviceCost(h.p, nn))
	require.NotContains(t, h.bridge.Dump(), "192.0.2.1,")
	require.NotContains(t, h.bridge.Dump(), "10.96.0.10")
	require.Equal(t, []string{"ns1/huge " + ProblemTooManyFlows}, events.events())
	small := statusOf(h, "ns1", "small")
	require.NotNil(t, small)
	require.Nil(t, small.Problem)
	require.Len(t, small.Ports, 1)

	// A full resync raises no new event and builds nothing.
	require.NoError(t, h.p.SyncNow(t.Context(), true))
	require.Len(t, events.events(), 1)

	fits := makeService("ns1", "huge", "10.96.0.10", manyPorts(2), manyExternalIPs(3))
	h.updateService(huge, fits)
	h.sync()
	st = statusOf(h, "ns1", "huge")
	require.Nil(t, st.Problem)
	require.Len(t, st.Ports, 2)
	require.Contains(t, h.bridge.Dump(), "192.0.2.3")
	require.NotEmpty(t, h.p.claims.claimed(nn))

	h.updateService(fits, huge)
	h.sync()
	st = statusOf(h, "ns1", "huge")
	require.Equal(t, ProblemTooManyFlows, st.Problem.Reason)
	require.Empty(t, st.Ports)
	require.Zero(t, serviceCost(h.p, nn), "a Service grown over the budget keeps no flow")
	require.NotContains(t, h.bridge.Dump(), "10.96.0.10")
	require.Empty(t, h.p.claims.claimed(nn))
	require.Equal(t, []string{"ns1/huge " + ProblemTooManyFlows, "ns1/huge " + ProblemTooManyFlows}, events.events())
}

// TestBudgetGlobalRefusesNewest: the node's budget admits Services oldest first (then by
// namespace/name), so a new Service never pushes out an older one, whatever the order they
// arrive in; when an admitted Service goes away, the refused ones are admitted again.
func TestBudgetGlobalRefusesNewest(t *testing.T) {
	events := &eventLog{}
	opts := testOptions()
	opts.Events = events
	// Each Service below costs 3 (one ClusterIP flow, the other-port reject flow, one bucket):
	// two fit.
	opts.MaxFlowsPerService, opts.MaxFlows = 10, 7
	h := newHarness(t, opts)
	svc := func(name, ip string, sec int) *v1.Service {
		h.addSlice(makeSlice("ns1", name, name+"-1", 8080, v1.ProtocolTCP, "http", ep{ip: "10.10.1.5", node: testNode, ready: true}))
		return makeService("ns1", name, ip, createdAt(sec))
	}
	// The newest arrives first and sorts first by name.
	attacker := svc("a-new", "10.96.0.1", 30)
	h.addService(attacker)
	h.sync()
	require.Nil(t, statusOf(h, "ns1", "a-new").Problem)
	require.Equal(t, 3, serviceCost(h.p, types.NamespacedName{Namespace: "ns1", Name: "a-new"}))
	h.addService(svc("old1", "10.96.0.2", 10))
	h.addService(svc("old2", "10.96.0.3", 20))
	h.sync()
	for _, n := range []string{"old1", "old2"} {
		st := statusOf(h, "ns1", n)
		require.Nil(t, st.Problem, n)
		require.Len(t, st.Ports, 1, n)
	}
	st := statusOf(h, "ns1", "a-new")
	require.Equal(t, ProblemTooManyFlows, st.Problem.Reason)
	require.Contains(t, st.Problem.Message, "node's budget of 7")
	require.Empty(t, st.Ports)
	require.NotContains(t, h.bridge.Dump(), "10.96.0.1,")
	require.Equal(t, []string{"ns1/a-new " + ProblemTooManyFlows}, events.events())

	// A fourth, newer Service does not take anyone's place either.
	h.addService(svc("b-newer", "10.96.0.4", 40))
	h.sync()
	require.Equal(t, ProblemTooManyFlows, statusOf(h, "ns1", "b-newer").Problem.Reason)
	require.Nil(t, statusOf(h, "ns1", "old1").Problem)

	// old1 goes away: the oldest refused Service takes its room.
	h.deleteService(makeService("ns1", "old1", "10.96.0.2", createdAt(10)))
	h.sync()
	st = statusOf(h, "ns1", "a-new")
	require.Nil(t, st.Problem)
	require.Len(t, st.Ports, 1)
	require.Contains(t, h.bridge.Dump(), "10.96.0.1,")
	require.Equal(t, ProblemTooManyFlows, statusOf(h, "ns1", "b-newer").Problem.Reason)
}

// TestBudgetEstimateBoundsPipeline: over every golden shape and a few larger ones, the
// estimate made from counts is never below what the pipeline builds (flows and buckets), and
// equals it but where endpoints are filtered or a ranged LB IP drops the node's connections.
func TestBudgetEstimateBoundsPipeline(t *testing.T) {
	cases := goldenCases()
	cases = append(cases,
		goldenCase{name: "etp-local-externalips-multiport", svc: makeService("ns1", "web", "10.96.0.10", manyPorts(4), manyExternalIPs(5),
			withETPLocal)},
		goldenCase{name: "etp-local-affinity-ranges", svc: makeService("ns1", "web", "10.96.0.10",
			withLB(30080, vip("172.18.0.100"), vip("172.18.0.101")), withSourceRanges("192.0.2.0/24", "198.51.100.7/32"),
			withETPLocal, withAffinity(60), withExternalIPs("203.0.113.7"))},
		goldenCase{name: "dual-stack-nodeport-itp-local", svc: makeService("ns1", "web", "10.96.0.10", dualStack("fd00:96::10"),
			withNodePort(30080), withITPLocal, withExternalIPs("203.0.113.7", "2001:db8::7")),
			opts: func(o *Options) { *o = dualStackOptions() }},
	)
	// The shapes whose estimate is above what is built, and why.
	inexact := map[string]string{
		"terminating-fallback":      "a terminating endpoint is counted in its slice",
		"topology-zone-hints":       "the endpoint hinted for another zone is counted",
		"etp-local-affinity-ranges": "the node's own connections to a ranged LB IP are dropped, counted as an entry",
	}
	var report []string
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := installGoldenCase(t, tc)
			nn := types.NamespacedName{Namespace: tc.svc.Namespace, Name: tc.svc.Name}
			est, ok := h.p.budget.entries.get(nn)
			require.True(t, ok)
			got := serviceCost(h.p, nn)
			require.GreaterOrEqual(t, est.cost, got, "the estimate must bound what is built")
			if why, ok := inexact[tc.name]; ok {
				t.Logf("built %d, estimated %d: %s", got, est.cost, why)
			} else {
				require.Equal(t, got, est.cost, "the estimate is exact for this shape")
			}
			report = append(report, fmt.Sprintf("%s %d/%d", tc.name, got, est.cost))
		})
	}
	t.Logf("built/estimated: %s", strings.Join(report, ", "))
}

// TestBudgetIncrementalMatchesRanking: whatever the order of changes, the Services a flowBudget
// refuses after each settle are those a ranking of every Service from scratch refuses (the
// shortcut taken while nothing is refused by the node's budget decides the same).
func TestBudgetIncrementalMatchesRanking(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		b := newFlowBudget(10, 30, nameMap[budgetEntry]{})
		for step := range 40 {
			nn := types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("s%d", r.IntN(12))}
			e := budgetEntry{cost: 1 + r.IntN(14), created: time.Unix(int64(r.IntN(5)), 0)}
			b.set(nn, e, r.IntN(5) != 0)
			b.settle()
			fresh := newFlowBudget(10, 30, nameMap[budgetEntry]{})
			b.entries.each(fresh.entries.put)
			fresh.walk = true
			fresh.settle()
			require.Equal(t, refusedNames(fresh), refusedNames(b), "round %d step %d", round, step)
			require.Equal(t, fresh.admitted, b.admitted, "round %d step %d", round, step)
		}
	}
}

func refusedNames(b *flowBudget) []string {
	var out []string
	for nn := range b.refused {
		out = append(out, nn.Name)
	}
	slices.Sort(out)
	return out
}
