package ipam

import (
	"fmt"
	"net/netip"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
)

// TestRetiringBlocksUntilUnpublished: an address a Service drops stays
// blocked for every other Service, automatic or requested, until the
// Service reports it no longer publishes it.
func TestRetiringBlocksUntilUnpublished(t *testing.T) {
	a := testAllocator(t)
	for i := 1; i <= 3; i++ {
		a.Ensure(Request{Owner: svc(fmt.Sprint("s", i)), Families: v4, Pool: "a"})
	}
	// s1 moves to pool "p": 10.0.0.1 retires.
	res := a.Ensure(Request{Owner: svc("s1"), Families: v4, Pool: "p"})
	require.Equal(t, []netip.Addr{ip("10.0.0.1")}, res.Retiring)
	require.Equal(t, []netip.Addr{ip("10.0.0.1")}, a.Retiring(svc("s1")))
	require.Equal(t, 4, a.InUse())

	res = a.Ensure(Request{Owner: svc("auto"), Families: v4, Pool: "a"})
	require.Empty(t, res.Assigned)
	require.Equal(t, []ProblemKind{Exhausted}, kinds(res.Problems))
	res = a.Ensure(Request{Owner: svc("wants"), Families: v4, Wanted: []netip.Addr{ip("10.0.0.1")}})
	require.Empty(t, res.Assigned)
	require.Equal(t, "requested address 10.0.0.1 is in use by ns/s1, which still publishes it until its status is updated",
		res.Problems[0].Message)

	dropped, wake := a.Unpublished(svc("s1"))
	require.Equal(t, []netip.Addr{ip("10.0.0.1")}, dropped)
	require.Equal(t, []types.NamespacedName{svc("auto"), svc("wants")}, wake)
	require.Empty(t, a.Retiring(svc("s1")))
	// "auto" waited first: it gets the address, "wants" keeps waiting.
	res = a.Ensure(Request{Owner: svc("wants"), Families: v4, Wanted: []netip.Addr{ip("10.0.0.1")}})
	require.Empty(t, res.Assigned)
	require.Contains(t, res.Problems[0].Message, "reserved for ns/auto")
	res = a.Ensure(Request{Owner: svc("auto"), Families: v4, Pool: "a"})
	require.Equal(t, []netip.Addr{ip("10.0.0.1")}, addrs(res.Assigned))
	require.Equal(t, []types.NamespacedName{svc("wants")}, res.Wake, "served: the younger waiter is retried")
}

// TestRetiringTakenBackBySameService: a Service that asks again for the
// address it is retiring gets it back.
func TestRetiringTakenBackBySameService(t *testing.T) {
	a := testAllocator(t)
	a.Ensure(Request{Owner: svc("s"), Families: v4, Wanted: []netip.Addr{ip("10.0.0.2")}})
	res := a.Ensure(Request{Owner: svc("s"), Families: v4, Wanted: []netip.Addr{ip("10.0.0.3")}})
	require.Equal(t, []netip.Addr{ip("10.0.0.2")}, res.Retiring)
	res = a.Ensure(Request{Owner: svc("s"), Families: v4, Wanted: []netip.Addr{ip("10.0.0.2")}})
	require.Equal(t, []netip.Addr{ip("10.0.0.2")}, addrs(res.Assigned))
	require.Equal(t, []netip.Addr{ip("10.0.0.3")}, res.Retiring)
	require.Equal(t, []netip.Addr{ip("10.0.0.3")}, a.Retiring(svc("s")))
}

// TestNewServiceDoesNotOvertakeWaiter: a freed address goes to the
// Service waiting longest, even when a newer Service (or a younger
// waiter) is synced first.
func TestNewServiceDoesNotOvertakeWaiter(t *testing.T) {
	a := testAllocator(t)
	req := func(name string) Request { return Request{Owner: svc(name), Families: v4, Pool: "p"} }
	a.Ensure(req("h1"))
	a.Ensure(req("h2"))
	require.Equal(t, []ProblemKind{Exhausted}, kinds(a.Ensure(req("old")).Problems))
	require.Equal(t, []ProblemKind{Exhausted}, kinds(a.Ensure(req("young")).Problems))
	require.Equal(t, []types.NamespacedName{svc("old"), svc("young")}, a.Waiters())

	_, wake := a.Release(svc("h1"))
	require.Equal(t, []types.NamespacedName{svc("old"), svc("young")}, wake)
	require.Equal(t, []ProblemKind{Exhausted}, kinds(a.Ensure(req("new")).Problems), "a new Service does not jump the queue")
	require.Equal(t, []ProblemKind{Exhausted}, kinds(a.Ensure(req("young")).Problems), "nor does a younger waiter")
	require.Equal(t, []netip.Addr{ip("192.0.2.1")}, addrs(a.Ensure(req("old")).Assigned))
	require.Equal(t, []types.NamespacedName{svc("young"), svc("new")}, a.Waiters())

	// A waiter that gives up (its Service is deleted) lifts its reservation.
	a.Ensure(req("h3")) // exhausted too: the youngest waiter
	_, wake = a.Release(svc("h2"))
	require.Equal(t, []types.NamespacedName{svc("young"), svc("new"), svc("h3")}, wake)
	_, wake = a.Release(svc("young"))
	require.Equal(t, []types.NamespacedName{svc("new"), svc("h3")}, wake)
	require.Equal(t, []netip.Addr{ip("192.0.2.2")}, addrs(a.Ensure(req("new")).Assigned))
}

// TestConcurrentReleaseAndWait races releases against waiting Services
// on several goroutines: no address is ever held by two Services, and
// every release wakes a waiter that was already waiting (no lost wakeup).
func TestConcurrentReleaseAndWait(t *testing.T) {
	a := testAllocator(t)
	const n = 40
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n {
				name := fmt.Sprintf("g%d-s%d", g, i)
				res := a.Ensure(Request{Owner: svc(name), Families: v4, Pool: "a"})
				if len(res.Assigned) > 0 && i%2 == 0 {
					a.Retire(svc(name))
					a.Unpublished(svc(name))
				}
			}
		}()
	}
	wg.Wait()
	seen := map[netip.Addr]types.NamespacedName{}
	for g := range 4 {
		for i := range n {
			name := svc(fmt.Sprintf("g%d-s%d", g, i))
			for _, as := range a.Assigned(name) {
				other, dup := seen[as.Addr]
				require.False(t, dup, "%s held by %s and %s", as.Addr, other, name)
				seen[as.Addr] = name
			}
		}
	}
	// Serving the waiters in order hands what is free to the longest
	// waiting, skipping nobody.
	free := 3 - a.InUse()
	for _, w := range a.Waiters() {
		res := a.Ensure(Request{Owner: w, Families: v4, Pool: "a"})
		require.Equal(t, free > 0, len(res.Assigned) > 0, "waiter %s, %d addresses free", w, free)
		if free > 0 {
			free--
			_, dup := seen[res.Assigned[0].Addr]
			require.False(t, dup)
			seen[res.Assigned[0].Addr] = w
		}
	}
}
