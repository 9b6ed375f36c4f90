package ipam

import (
	"fmt"
	"net/netip"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

var (
	v4   = []v1.IPFamily{v1.IPv4Protocol}
	dual = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	ip   = netip.MustParseAddr
	tcp  = func(port int32) PortKey { return PortKey{Protocol: v1.ProtocolTCP, Port: port} }
)

func svc(name string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: name} }

// testAllocator has pool "a" (VIP: 10.0.0.1-10.0.0.3 and fd00::1-fd00::2)
// and pool "p" (Proxy: 192.0.2.0/30, i.e. 192.0.2.1-192.0.2.2).
func testAllocator(t *testing.T) *Allocator {
	t.Helper()
	return New([]*Pool{
		newPool(t, PoolSpec{Name: "a", Mode: v1.LoadBalancerIPModeVIP, Ranges: []Range{rng("10.0.0.1", "10.0.0.3"), rng("fd00::1", "fd00::2")}}),
		newPool(t, PoolSpec{Name: "p", Mode: v1.LoadBalancerIPModeProxy, Ranges: []Range{rng("192.0.2.1", "192.0.2.2")}}),
	}, Reservations{})
}

func rng(first, last string) Range { return Range{First: ip(first), Last: ip(last)} }

func newPool(t *testing.T, s PoolSpec) *Pool {
	t.Helper()
	p, err := NewPool(s)
	require.NoError(t, err)
	return p
}

func addrs(as []Assignment) []netip.Addr {
	out := []netip.Addr{}
	for _, a := range as {
		out = append(out, a.Addr)
	}
	return out
}

func kinds(ps []Problem) []ProblemKind {
	var out []ProblemKind
	for _, p := range ps {
		out = append(out, p.Kind)
	}
	return out
}

func TestEnsureAllocates(t *testing.T) {
	for _, tc := range []struct {
		name     string
		req      Request
		want     []netip.Addr
		problems []ProblemKind
		msg      string
	}{
		{name: "first free IPv4", req: Request{Families: v4}, want: []netip.Addr{ip("10.0.0.1")}},
		{name: "dual-stack", req: Request{Families: dual}, want: []netip.Addr{ip("10.0.0.1"), ip("fd00::1")}},
		{name: "IPv6 first", req: Request{Families: []v1.IPFamily{v1.IPv6Protocol, v1.IPv4Protocol}},
			want: []netip.Addr{ip("fd00::1"), ip("10.0.0.1")}},
		{name: "selected pool", req: Request{Families: v4, Pool: "p"}, want: []netip.Addr{ip("192.0.2.1")}},
		{name: "requested address", req: Request{Families: dual, Wanted: []netip.Addr{ip("fd00::2"), ip("10.0.0.3")}},
			want: []netip.Addr{ip("10.0.0.3"), ip("fd00::2")}},
		{name: "requested IPv4-mapped address", req: Request{Families: v4, Wanted: []netip.Addr{ip("::ffff:10.0.0.2")}},
			want: []netip.Addr{ip("10.0.0.2")}},
		{name: "requested address outside pools falls back", req: Request{Families: v4, Wanted: []netip.Addr{ip("10.9.9.9")}},
			want: []netip.Addr{ip("10.0.0.1")}, problems: []ProblemKind{WantedNotInPool},
			msg: "requested address 10.9.9.9 is not in any pool"},
		{name: "requested address outside selected pool", req: Request{Families: v4, Pool: "p", Wanted: []netip.Addr{ip("10.0.0.2")}},
			want: []netip.Addr{ip("192.0.2.1")}, problems: []ProblemKind{WantedNotInPool},
			msg: `requested address 10.0.0.2 is not in pool "p"`},
		{name: "requested address of unused family", req: Request{Families: v4, Wanted: []netip.Addr{ip("fd00::1")}},
			want: []netip.Addr{ip("10.0.0.1")}, problems: []ProblemKind{WantedNotInPool},
			msg: "requested address fd00::1 is IPv6 but the Service's ipFamilies are [IPv4]"},
		{name: "no pool for family", req: Request{Families: dual, Pool: "p"},
			want: []netip.Addr{ip("192.0.2.1")}, problems: []ProblemKind{NoPoolForFamily},
			msg: `pool "p" has no IPv6 addresses`},
		{name: "unknown pool", req: Request{Families: v4, Pool: "nope"},
			want: []netip.Addr{}, problems: []ProblemKind{UnknownPool}, msg: `pool "nope" (annotation) is not configured`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := testAllocator(t)
			tc.req.Owner = svc("s")
			res := a.Ensure(tc.req)
			require.Equal(t, tc.want, addrs(res.Assigned))
			require.Equal(t, tc.want, addrs(res.Added))
			require.Equal(t, tc.problems, kinds(res.Problems))
			if tc.msg != "" {
				require.Equal(t, tc.msg, res.Problems[0].Message)
			}
			// Idempotent.
			again := a.Ensure(tc.req)
			require.Equal(t, tc.want, addrs(again.Assigned))
			require.Empty(t, again.Added)
			require.Empty(t, again.Retiring)
		})
	}
}

func TestExhaustionAndRelease(t *testing.T) {
	a := testAllocator(t)
	for i := 1; i <= 3; i++ {
		res := a.Ensure(Request{Owner: svc(fmt.Sprint("s", i)), Families: v4})
		require.Equal(t, []netip.Addr{ip(fmt.Sprintf("10.0.0.%d", i))}, addrs(res.Assigned))
	}
	// Pool "a" is full; automatic allocation moves on to pool "p".
	res := a.Ensure(Request{Owner: svc("s4"), Families: v4})
	require.Equal(t, []netip.Addr{ip("192.0.2.1")}, addrs(res.Assigned))
	res = a.Ensure(Request{Owner: svc("s5"), Families: v4, Pool: "a"})
	require.Empty(t, res.Assigned)
	require.Equal(t, []ProblemKind{Exhausted}, kinds(res.Problems))
	require.Equal(t, `no free IPv4 address in pool "a"`, res.Problems[0].Message)

	dropped, wake := a.Release(svc("s2"))
	require.Equal(t, []netip.Addr{ip("10.0.0.2")}, dropped)
	require.Equal(t, []types.NamespacedName{svc("s5")}, wake, "the release wakes the waiter")
	dropped, wake = a.Release(svc("s2"))
	require.Nil(t, dropped)
	require.Nil(t, wake)
	res = a.Ensure(Request{Owner: svc("s5"), Families: v4, Pool: "a"})
	require.Equal(t, []netip.Addr{ip("10.0.0.2")}, addrs(res.Assigned))
	require.Empty(t, res.Problems)
	require.Equal(t, 4, a.InUse())
}

func TestRequestChanges(t *testing.T) {
	a := testAllocator(t)
	s := svc("s")
	res := a.Ensure(Request{Owner: s, Families: dual})
	require.Equal(t, []netip.Addr{ip("10.0.0.1"), ip("fd00::1")}, addrs(res.Assigned))
	// Dropping a family retires its address.
	res = a.Ensure(Request{Owner: s, Families: v4})
	require.Equal(t, []netip.Addr{ip("fd00::1")}, res.Retiring)
	// Requesting another address moves the Service there.
	res = a.Ensure(Request{Owner: s, Families: v4, Wanted: []netip.Addr{ip("10.0.0.3")}})
	require.Equal(t, []netip.Addr{ip("10.0.0.3")}, addrs(res.Assigned))
	require.Equal(t, []netip.Addr{ip("10.0.0.1")}, res.Retiring)
	// Selecting another pool moves it too.
	res = a.Ensure(Request{Owner: s, Families: v4, Pool: "p"})
	require.Equal(t, []netip.Addr{ip("192.0.2.1")}, addrs(res.Assigned))
	require.Equal(t, "p", res.Assigned[0].Pool.Name)
	require.Equal(t, v1.LoadBalancerIPModeProxy, res.Assigned[0].Pool.Mode)
}

func TestSharing(t *testing.T) {
	want := []netip.Addr{ip("10.0.0.2")}
	for _, tc := range []struct {
		name      string
		first     Request
		second    Request
		shared    bool
		inUseText string
	}{
		{name: "same key, distinct ports",
			first:  Request{ShareKey: "k", Ports: []PortKey{tcp(80)}},
			second: Request{ShareKey: "k", Ports: []PortKey{tcp(443), {Protocol: v1.ProtocolUDP, Port: 80}}}, shared: true},
		{name: "same key, clashing port",
			first:     Request{ShareKey: "k", Ports: []PortKey{tcp(80), tcp(81)}},
			second:    Request{ShareKey: "k", Ports: []PortKey{tcp(81)}},
			inUseText: "requested address 10.0.0.2 is in use by ns/first with clashing ports 81/TCP"},
		{name: "different keys",
			first:     Request{ShareKey: "k", Ports: []PortKey{tcp(80)}},
			second:    Request{ShareKey: "other", Ports: []PortKey{tcp(443)}},
			inUseText: `requested address 10.0.0.2 is in use by ns/first with a different sharing key ("k")`},
		{name: "second does not opt in",
			first:     Request{ShareKey: "k", Ports: []PortKey{tcp(80)}},
			second:    Request{Ports: []PortKey{tcp(443)}},
			inUseText: "requested address 10.0.0.2 is in use by ns/first and this Service does not allow sharing"},
		{name: "first does not opt in",
			first:     Request{Ports: []PortKey{tcp(80)}},
			second:    Request{ShareKey: "k", Ports: []PortKey{tcp(443)}},
			inUseText: "requested address 10.0.0.2 is in use by ns/first which does not allow sharing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := testAllocator(t)
			first, second := tc.first, tc.second
			first.Owner, first.Families, first.Wanted = svc("first"), v4, want
			second.Owner, second.Families, second.Wanted = svc("second"), v4, want
			require.Equal(t, want, addrs(a.Ensure(first).Assigned))
			res := a.Ensure(second)
			if tc.shared {
				require.Equal(t, want, addrs(res.Assigned))
				require.Empty(t, res.Problems)
				require.Equal(t, []types.NamespacedName{svc("first"), svc("second")}, a.Holders(want[0]))
				// Releasing one keeps the address held by the other.
				a.Release(svc("first"))
				require.Equal(t, []types.NamespacedName{svc("second")}, a.Holders(want[0]))
				return
			}
			require.Empty(t, res.Assigned)
			require.Equal(t, []ProblemKind{WantedInUse}, kinds(res.Problems))
			require.Equal(t, tc.inUseText, res.Problems[0].Message)
		})
	}
}

func TestSharingAutomatic(t *testing.T) {
	a := testAllocator(t)
	r1 := a.Ensure(Request{Owner: svc("web"), Families: v4, ShareKey: "k", Ports: []PortKey{tcp(80)}})
	r2 := a.Ensure(Request{Owner: svc("dns"), Families: v4, ShareKey: "k", Ports: []PortKey{{Protocol: v1.ProtocolUDP, Port: 53}}})
	require.Equal(t, addrs(r1.Assigned), addrs(r2.Assigned), "same key and distinct ports share automatically")
	r3 := a.Ensure(Request{Owner: svc("web2"), Families: v4, ShareKey: "k", Ports: []PortKey{tcp(80)}})
	require.Equal(t, []netip.Addr{ip("10.0.0.2")}, addrs(r3.Assigned), "clashing port gets its own address")
	// A port change that clashes makes the changed Service move.
	r2 = a.Ensure(Request{Owner: svc("dns"), Families: v4, ShareKey: "k", Ports: []PortKey{tcp(80)}})
	require.Equal(t, []netip.Addr{ip("10.0.0.3")}, addrs(r2.Assigned))
	require.Equal(t, []netip.Addr{ip("10.0.0.1")}, r2.Retiring)
}

func TestRestore(t *testing.T) {
	a := testAllocator(t)
	require.Empty(t, a.Restore(svc("s1"), []netip.Addr{ip("10.0.0.2"), ip("fd00::2")}, "", nil))
	problems := a.Restore(svc("s2"), []netip.Addr{ip("10.0.0.2"), ip("10.9.9.9")}, "", nil)
	require.Equal(t, []ProblemKind{WantedInUse, WantedNotInPool}, kinds(problems))
	require.Empty(t, a.Assigned(svc("s2")))
	// Restored allocations are kept by Ensure and never handed out again.
	res := a.Ensure(Request{Owner: svc("s1"), Families: dual})
	require.Equal(t, []netip.Addr{ip("10.0.0.2"), ip("fd00::2")}, addrs(res.Assigned))
	require.Empty(t, res.Added)
	res = a.Ensure(Request{Owner: svc("s2"), Families: dual})
	require.Equal(t, []netip.Addr{ip("10.0.0.1"), ip("fd00::1")}, addrs(res.Assigned))
	res = a.Ensure(Request{Owner: svc("s3"), Families: dual})
	require.Equal(t, []netip.Addr{ip("10.0.0.3")}, addrs(res.Assigned))
	require.Equal(t, []ProblemKind{Exhausted}, kinds(res.Problems))
}

func TestConcurrentEnsureNeverDuplicates(t *testing.T) {
	a := New([]*Pool{newPool(t, PoolSpec{Name: "big", Mode: v1.LoadBalancerIPModeVIP, Ranges: []Range{rng("10.1.0.1", "10.1.3.254")}})}, Reservations{})
	const n = 1000
	got := make([]netip.Addr, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := a.Ensure(Request{Owner: svc(fmt.Sprint("s", i)), Families: v4})
			got[i] = res.Assigned[0].Addr
		}()
	}
	wg.Wait()
	seen := map[netip.Addr]bool{}
	for _, addr := range got {
		require.False(t, seen[addr], "%s handed out twice", addr)
		seen[addr] = true
	}
}

func TestNewPoolErrors(t *testing.T) {
	_, err := NewPool(PoolSpec{Name: "y", Mode: "Other", Ranges: []Range{rng("10.0.0.1", "10.0.0.254")}})
	require.EqualError(t, err, "pool \"y\": unknown ipMode \"Other\"")
	_, err = NewPool(PoolSpec{Name: "z", Mode: v1.LoadBalancerIPModeVIP})
	require.EqualError(t, err, "pool \"z\" has no addresses")
}
