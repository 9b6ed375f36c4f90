package ipam

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

func in(ns, name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }

// TestSharingAcrossNamespaces, as data: who may join an address another Service holds.
func TestSharingAcrossNamespaces(t *testing.T) {
	for _, tc := range []struct {
		name      string
		crossNS   bool
		joiner    types.NamespacedName
		key       string
		port      int32
		want      []netip.Addr
		problems  []ProblemKind
		msgSubstr string
	}{
		{name: "same namespace, same key", joiner: in("a", "two"), key: "k", port: 81, want: []netip.Addr{ip("10.0.0.1")}},
		{name: "other namespace, same key: refused", joiner: in("b", "two"), key: "k", port: 81, want: []netip.Addr{},
			problems:  []ProblemKind{SharingNotAllowed},
			msgSubstr: `a/one of another namespace: pool "a" does not allow sharing across namespaces (allowCrossNamespaceSharing)`},
		{name: "other namespace, pool allows it", crossNS: true, joiner: in("b", "two"), key: "k", port: 81, want: []netip.Addr{ip("10.0.0.1")}},
		{name: "other namespace, other key: in use (waits)", joiner: in("b", "two"), key: "x", port: 81, want: []netip.Addr{},
			problems: []ProblemKind{WantedInUse}, msgSubstr: `a/one with a different sharing key ("k")`},
		{name: "other namespace, same key, clashing port: in use", joiner: in("b", "two"), key: "k", port: 80, want: []netip.Addr{},
			problems: []ProblemKind{WantedInUse}, msgSubstr: "clashing ports 80/TCP"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := New([]*Pool{newPool(t, PoolSpec{Name: "a", Mode: v1.LoadBalancerIPModeVIP,
				Ranges: []Range{rng("10.0.0.1", "10.0.0.3")}, Scope: Scope{CrossNamespaceSharing: tc.crossNS}})}, Reservations{})
			first := a.Ensure(Request{Owner: in("a", "one"), Families: v4, ShareKey: "k", Ports: []PortKey{tcp(80)}})
			require.Equal(t, []netip.Addr{ip("10.0.0.1")}, addrs(first.Assigned))
			res := a.Ensure(Request{Owner: tc.joiner, Families: v4, ShareKey: tc.key, Ports: []PortKey{tcp(tc.port)},
				Wanted: []netip.Addr{ip("10.0.0.1")}})
			require.Equal(t, tc.want, addrs(res.Assigned))
			require.Equal(t, tc.problems, kinds(res.Problems))
			if tc.msgSubstr != "" {
				require.Contains(t, res.Problems[0].Message, tc.msgSubstr)
			}
			// Without a requested address, a Service of another namespace gets its own address.
			if !tc.crossNS {
				other := a.Ensure(Request{Owner: in("c", "auto"), Families: v4, ShareKey: "k", Ports: []PortKey{tcp(82)}})
				require.NotContains(t, addrs(other.Assigned), ip("10.0.0.1"))
			}
		})
	}
}

// TestRestoreDropsCrossNamespaceSharing: after an upgrade, a second namespace's Service that
// shared an address under the old rules is not restored on it.
func TestRestoreDropsCrossNamespaceSharing(t *testing.T) {
	a := testAllocator(t)
	require.Empty(t, a.Restore(in("a", "one"), []netip.Addr{ip("10.0.0.1")}, "k", []PortKey{tcp(80)}))
	problems := a.Restore(in("b", "two"), []netip.Addr{ip("10.0.0.1")}, "k", []PortKey{tcp(81)})
	require.Equal(t, []ProblemKind{WantedInUse}, kinds(problems))
	require.Equal(t, []types.NamespacedName{in("a", "one")}, a.Holders(ip("10.0.0.1")))
}

// TestPoolScopeAllocation: candidate pools follow namespaces, namespaceSelector,
// serviceSelector and autoAssign.
func TestPoolScopeAllocation(t *testing.T) {
	sel := func(k, v string) labels.Selector { return labels.SelectorFromSet(labels.Set{k: v}) }
	a := New([]*Pool{
		newPool(t, PoolSpec{Name: "team", Mode: v1.LoadBalancerIPModeVIP, Ranges: []Range{rng("10.0.5.1", "10.0.5.1")},
			Scope: Scope{Namespaces: []string{"team-a"}, NamespaceSelector: sel("tier", "gold")}}),
		newPool(t, PoolSpec{Name: "svc", Mode: v1.LoadBalancerIPModeVIP, Ranges: []Range{rng("10.0.6.1", "10.0.6.1")},
			Scope: Scope{ServiceSelector: sel("expose", "yes")}}),
		newPool(t, PoolSpec{Name: "manual", Mode: v1.LoadBalancerIPModeVIP, Ranges: []Range{rng("10.0.7.1", "10.0.7.1")},
			Scope: Scope{Manual: true}}),
	}, Reservations{})
	for _, tc := range []struct {
		name     string
		req      Request
		want     []netip.Addr
		problems []ProblemKind
		msg      string
	}{
		{name: "listed namespace", req: Request{Owner: in("team-a", "s")}, want: []netip.Addr{ip("10.0.5.1")}},
		{name: "selected namespace", req: Request{Owner: in("x", "s"), NamespaceLabels: map[string]string{"tier": "gold"}},
			want: []netip.Addr{ip("10.0.5.1")}},
		{name: "selected Service", req: Request{Owner: in("x", "s"), Labels: map[string]string{"expose": "yes"}},
			want: []netip.Addr{ip("10.0.6.1")}},
		{name: "nothing for it", req: Request{Owner: in("x", "s")}, want: []netip.Addr{}, problems: []ProblemKind{NoPoolForFamily},
			msg: `no pool with IPv4 addresses is for this Service: pool "team" is not for namespace "x" (namespaces [team-a] or namespaceSelector "tier=gold"); ` +
				`pool "svc" is not for this Service: its labels do not match serviceSelector "expose=yes"; ` +
				`pool "manual" has autoAssign false (name it or request one of its addresses)`},
		{name: "naming an unselected pool", req: Request{Owner: in("x", "s"), Pool: "team"}, want: []netip.Addr{},
			problems: []ProblemKind{PoolNotAllowed}, msg: `pool "team" is not for namespace "x" (namespaces [team-a] or namespaceSelector "tier=gold")`},
		{name: "requesting an address of an unselected pool", req: Request{Owner: in("x", "s"), Wanted: []netip.Addr{ip("10.0.6.1")}},
			want: []netip.Addr{}, problems: []ProblemKind{PoolNotAllowed, NoPoolForFamily}},
		{name: "naming the manual pool", req: Request{Owner: in("x", "s"), Pool: "manual"}, want: []netip.Addr{ip("10.0.7.1")}},
		{name: "requesting a manual address", req: Request{Owner: in("x", "s"), Wanted: []netip.Addr{ip("10.0.7.1")}},
			want: []netip.Addr{ip("10.0.7.1")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Families = v4
			res := a.Ensure(tc.req)
			require.Equal(t, tc.want, addrs(res.Assigned))
			require.Equal(t, tc.problems, kinds(res.Problems))
			if tc.msg != "" {
				require.Equal(t, tc.msg, res.Problems[0].Message)
			}
			a.Release(tc.req.Owner)
		})
	}
}

// TestReservationOfDeletedService: a deleted Service's address is kept for its
// namespace/name until the grace period ends, over older waiters, and comes back to it.
func TestReservationOfDeletedService(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	a := New([]*Pool{newPool(t, PoolSpec{Name: "one", Mode: v1.LoadBalancerIPModeVIP, Ranges: []Range{rng("10.0.0.1", "10.0.0.1")}})},
		Reservations{Clock: clk, Grace: time.Minute})
	victim, waiter := in("v", "web"), in("t", "grab")
	require.Equal(t, []netip.Addr{ip("10.0.0.1")}, addrs(a.Ensure(Request{Owner: victim, Families: v4}).Assigned))
	require.Equal(t, []ProblemKind{Exhausted}, kinds(a.Ensure(Request{Owner: waiter, Families: v4}).Problems))

	dropped, wake := a.ReleaseDeleted(victim)
	require.Equal(t, []netip.Addr{ip("10.0.0.1")}, dropped)
	require.Equal(t, []types.NamespacedName{waiter}, wake)
	res := a.Ensure(Request{Owner: waiter, Families: v4})
	require.Empty(t, res.Assigned, "the waiter took the deleted Service's address")
	require.Equal(t, clk.Now().Add(time.Minute), res.RetryAt)
	require.Contains(t, res.Problems[0].Message, "(some are reserved for deleted Services until 2026-03-01T12:01:00Z)")
	want := a.Ensure(Request{Owner: waiter, Families: v4, Wanted: []netip.Addr{ip("10.0.0.1")}})
	require.Equal(t, "requested address 10.0.0.1 is reserved for v/web, deleted, until 2026-03-01T12:01:00Z in case it is re-created",
		want.Problems[0].Message)

	require.Equal(t, []netip.Addr{ip("10.0.0.1")}, addrs(a.Ensure(Request{Owner: victim, Families: v4}).Assigned),
		"the re-created Service gets its address back, over the older waiter")
	a.ReleaseDeleted(victim)
	clk.SetTime(clk.Now().Add(time.Minute))
	require.Equal(t, []netip.Addr{ip("10.0.0.1")}, addrs(a.Ensure(Request{Owner: waiter, Families: v4}).Assigned),
		"the reservation ended")
}
