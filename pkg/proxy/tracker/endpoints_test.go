package tracker

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
)

var barNN = types.NamespacedName{Namespace: "ns", Name: "bar"}

func ptr[T any](v T) *T { return &v }

func slice(name, service, rv string, ips ...string) *discovery.EndpointSlice {
	s := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: ptr("http"), Protocol: ptr(v1.ProtocolTCP), Port: ptr(int32(8080))}},
	}
	if service != "" {
		s.Labels = map[string]string{discovery.LabelServiceName: service}
	}
	for _, ip := range ips {
		s.Endpoints = append(s.Endpoints, discovery.Endpoint{Addresses: []string{ip}})
	}
	return s
}

func sliceNames(ss []*model.EndpointSlice) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}

// endpointIPs merges the tracker's current slices of svc for port "http" the way the proxier does.
func endpointIPs(tr *EndpointsChangeTracker, svc types.NamespacedName) []string {
	port := model.ServicePortName{NamespacedName: svc, Port: "http", Protocol: model.TCP}
	var out []string
	for _, e := range model.EndpointsForServicePort(tr.SlicesFor(svc), port, "node1", model.Families{IPv4: true}) {
		out = append(out, e.IP.String())
	}
	return out
}

func TestEndpointSliceAddUpdateDelete(t *testing.T) {
	calls := 0
	tr := NewEndpointsChangeTracker(func() { calls++ })

	s1 := slice("foo-1", "foo", "1", "10.0.0.1")
	tr.OnEndpointSliceAdd(s1)
	dirty, _ := tr.DrainDirty()
	require.Equal(t, sets.New(fooNN), dirty)
	require.Equal(t, []string{"10.0.0.1"}, endpointIPs(tr, fooNN))
	require.Empty(t, tr.Dirty(), "drained")
	require.Equal(t, sets.New(fooNN), tr.Services(), "slices are kept across drains")

	s1b := slice("foo-1", "foo", "2", "10.0.0.1", "10.0.0.2")
	tr.OnEndpointSliceUpdate(s1, s1b)
	require.Equal(t, sets.New(fooNN), tr.Dirty())
	require.Equal(t, []string{"10.0.0.1", "10.0.0.2"}, endpointIPs(tr, fooNN))
	tr.DrainDirty()

	tr.OnEndpointSliceDelete(s1b)
	dirty, _ = tr.DrainDirty()
	require.Equal(t, sets.New(fooNN), dirty)
	require.Nil(t, tr.SlicesFor(fooNN))
	require.Empty(t, tr.Services())
	require.Equal(t, 3, calls)

	// Deleting something never seen is not a change.
	tr.OnEndpointSliceDelete(slice("ghost", "foo", "1"))
	require.Empty(t, tr.Dirty())
	require.Equal(t, 3, calls)
}

func TestEndpointSliceResyncIsNotDirty(t *testing.T) {
	tr := NewEndpointsChangeTracker(nil)
	s := slice("foo-1", "foo", "1", "10.0.0.1")
	tr.OnEndpointSliceAdd(s)
	tr.DrainDirty()
	tr.OnEndpointSliceUpdate(s, s)
	s2 := slice("foo-1", "foo", "2", "10.0.0.1") // only resourceVersion differs
	tr.OnEndpointSliceUpdate(s, s2)
	require.Empty(t, tr.Dirty())
	require.Equal(t, "2", tr.SlicesFor(fooNN)[0].ResourceVersion, "the newest object is kept")
}

func TestEndpointsSplitAndDuplicatedAcrossSlices(t *testing.T) {
	tr := NewEndpointsChangeTracker(nil)
	tr.OnEndpointSliceAdd(slice("foo-b", "foo", "1", "10.0.0.3", "10.0.0.2"))
	tr.OnEndpointSliceAdd(slice("foo-a", "foo", "1", "10.0.0.1", "10.0.0.2"))
	tr.OnEndpointSliceAdd(slice("bar-a", "bar", "1", "10.0.0.9"))
	require.Equal(t, []string{"foo-a", "foo-b"}, sliceNames(tr.SlicesFor(fooNN)))
	require.Equal(t, []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}, endpointIPs(tr, fooNN))
	require.Equal(t, []string{"10.0.0.9"}, endpointIPs(tr, barNN))
	dirty, _ := tr.DrainDirty()
	require.Equal(t, sets.New(fooNN, barNN), dirty)
}

func TestEndpointMovesBetweenSlices(t *testing.T) {
	tr := NewEndpointsChangeTracker(nil)
	a := slice("foo-a", "foo", "1", "10.0.0.1", "10.0.0.2")
	b := slice("foo-b", "foo", "1", "10.0.0.3")
	tr.OnEndpointSliceAdd(a)
	tr.OnEndpointSliceAdd(b)
	tr.DrainDirty()

	// The controller moves 10.0.0.2 from a to b. Whether a sync observes the intermediate state
	// (b updated first: duplicated) or not, 10.0.0.2 is there exactly once.
	b2 := slice("foo-b", "foo", "2", "10.0.0.3", "10.0.0.2")
	tr.OnEndpointSliceUpdate(b, b2)
	require.Equal(t, []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}, endpointIPs(tr, fooNN))
	a2 := slice("foo-a", "foo", "2", "10.0.0.1")
	tr.OnEndpointSliceUpdate(a, a2)
	require.Equal(t, []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}, endpointIPs(tr, fooNN))
	dirty, _ := tr.DrainDirty()
	require.Equal(t, sets.New(fooNN), dirty)

	// And out again in the other order (removed first): it is gone in between.
	a3 := slice("foo-a", "foo", "3", "10.0.0.1", "10.0.0.2")
	b3 := slice("foo-b", "foo", "3", "10.0.0.3")
	tr.OnEndpointSliceUpdate(b2, b3)
	require.Equal(t, []string{"10.0.0.1", "10.0.0.3"}, endpointIPs(tr, fooNN))
	tr.OnEndpointSliceUpdate(a2, a3)
	require.Equal(t, []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}, endpointIPs(tr, fooNN))
}

func TestEndpointSliceMovesBetweenServices(t *testing.T) {
	tr := NewEndpointsChangeTracker(nil)
	s := slice("shared", "foo", "1", "10.0.0.1")
	tr.OnEndpointSliceAdd(s)
	tr.DrainDirty()

	moved := slice("shared", "bar", "2", "10.0.0.1")
	tr.OnEndpointSliceUpdate(s, moved)
	dirty, _ := tr.DrainDirty()
	require.Equal(t, sets.New(fooNN, barNN), dirty)
	require.Nil(t, tr.SlicesFor(fooNN))
	require.Equal(t, []string{"10.0.0.1"}, endpointIPs(tr, barNN))

	// The label removed: the slice is dropped from bar and then ignored.
	unlabelled := slice("shared", "", "3", "10.0.0.1")
	tr.OnEndpointSliceUpdate(moved, unlabelled)
	dirty, _ = tr.DrainDirty()
	require.Equal(t, sets.New(barNN), dirty)
	require.Empty(t, tr.Services())

	// The tracker's own record wins over a stale old object: an update whose old object claims
	// the wrong Service still removes the slice from where it really is.
	tr.OnEndpointSliceAdd(slice("x", "foo", "4", "10.0.0.5"))
	tr.DrainDirty()
	tr.OnEndpointSliceUpdate(slice("x", "bar", "4", "10.0.0.5"), slice("x", "bar", "5", "10.0.0.5"))
	require.Nil(t, tr.SlicesFor(fooNN))
	require.Equal(t, []string{"10.0.0.5"}, endpointIPs(tr, barNN))
}

func TestEndpointSliceWithoutServiceLabelIgnored(t *testing.T) {
	calls := 0
	tr := NewEndpointsChangeTracker(func() { calls++ })
	s := slice("orphan", "", "1", "10.0.0.1")
	tr.OnEndpointSliceAdd(s)
	tr.OnEndpointSliceUpdate(s, slice("orphan", "", "2", "10.0.0.2"))
	tr.OnEndpointSliceDelete(s)
	tr.OnEndpointSliceAdd(nil)
	tr.OnEndpointSliceDelete(nil)
	require.Empty(t, tr.Dirty())
	require.Empty(t, tr.Services())
	require.Zero(t, calls)
}

// TestEndpointSliceHeadlessLabel: like kube-proxy, whose EndpointSlice informer selects
// !service.kubernetes.io/headless, a slice with that label serves no Service: one that gains
// it is gone (its Service dirty, no endpoints), and one that loses it serves again (the upstream
// e2e spec "should implement service.kubernetes.io/headless").
func TestEndpointSliceHeadlessLabel(t *testing.T) {
	tr := NewEndpointsChangeTracker(nil)
	s1 := slice("foo-1", "foo", "1", "10.0.0.1")
	tr.OnEndpointSliceAdd(s1)
	tr.DrainDirty()

	headless := slice("foo-1", "foo", "2", "10.0.0.1")
	headless.Labels[v1.IsHeadlessService] = ""
	tr.OnEndpointSliceUpdate(s1, headless)
	require.Equal(t, sets.New(fooNN), tr.Dirty())
	require.Empty(t, endpointIPs(tr, fooNN))
	tr.DrainDirty()

	tr.OnEndpointSliceUpdate(headless, slice("foo-1", "foo", "3", "10.0.0.1"))
	require.Equal(t, sets.New(fooNN), tr.Dirty())
	require.Equal(t, []string{"10.0.0.1"}, endpointIPs(tr, fooNN))
	tr.DrainDirty()

	other := slice("bar-1", "bar", "1", "10.0.0.2")
	other.Labels[v1.IsHeadlessService] = ""
	tr.OnEndpointSliceAdd(other)
	require.Empty(t, tr.Dirty(), "a slice created with the label is ignored")
}

func TestEndpointSliceDeleteThenRecreateBeforeSync(t *testing.T) {
	tr := NewEndpointsChangeTracker(nil)
	s := slice("foo-1", "foo", "1", "10.0.0.1")
	tr.OnEndpointSliceAdd(s)
	tr.DrainDirty()
	tr.OnEndpointSliceDelete(s)
	tr.OnEndpointSliceAdd(slice("foo-1", "foo", "5", "10.0.0.7"))
	dirty, _ := tr.DrainDirty()
	require.Equal(t, sets.New(fooNN), dirty)
	require.Equal(t, []string{"10.0.0.7"}, endpointIPs(tr, fooNN))
}

func TestLastChangeTriggerTime(t *testing.T) {
	tr := NewEndpointsChangeTracker(nil)
	t1 := time.Date(2026, 1, 2, 3, 4, 5, 600_000_000, time.UTC)
	t2 := t1.Add(3 * time.Second)
	withTime := func(s *discovery.EndpointSlice, ts string) *discovery.EndpointSlice {
		s.Annotations = map[string]string{v1.EndpointsLastChangeTriggerTime: ts}
		return s
	}
	tr.OnEndpointSliceAdd(withTime(slice("foo-b", "foo", "1", "10.0.0.2"), t2.Format(time.RFC3339Nano)))
	tr.OnEndpointSliceAdd(withTime(slice("foo-a", "foo", "1", "10.0.0.1"), t1.Format(time.RFC3339Nano)))
	tr.OnEndpointSliceAdd(withTime(slice("bar-a", "bar", "1", "10.0.0.3"), "yesterday"))
	dirty, times := tr.DrainDirty()
	require.Equal(t, sets.New(fooNN, barNN), dirty)
	require.Len(t, times, 1, "unparseable annotation is ignored")
	require.True(t, times[fooNN].Equal(t2), "latest trigger time kept, got %v", times[fooNN])

	// Times are reset by a drain, and not recorded for no-op updates.
	s := withTime(slice("foo-a", "foo", "2", "10.0.0.1"), t2.Add(time.Hour).Format(time.RFC3339Nano))
	tr.OnEndpointSliceUpdate(nil, s)
	_, times = tr.DrainDirty()
	require.Empty(t, times)
}

func TestEndpointsTrackerIPv6AndPortsChange(t *testing.T) {
	tr := NewEndpointsChangeTracker(nil)
	s := slice("foo-1", "foo", "1", "10.0.0.1")
	tr.OnEndpointSliceAdd(s)
	tr.DrainDirty()
	// A change of ports only is a change.
	p := slice("foo-1", "foo", "2", "10.0.0.1")
	p.Ports[0].Port = ptr(int32(9090))
	tr.OnEndpointSliceUpdate(s, p)
	require.Equal(t, sets.New(fooNN), tr.Dirty())
	eps := model.EndpointsForServicePort(tr.SlicesFor(fooNN),
		model.ServicePortName{NamespacedName: fooNN, Port: "http", Protocol: model.TCP}, "", model.Families{IPv4: true})
	require.Equal(t, []model.Endpoint{{IP: netip.MustParseAddr("10.0.0.1"), Port: 9090, Ready: true, Serving: true}}, eps)
}

// TestEndpointSliceGeneration: a Service's generation changes with every change of its slices,
// drained or not, stays put through no-op updates and is 0 once its last slice is gone; a
// re-created Service never gets an earlier number back.
func TestEndpointSliceGeneration(t *testing.T) {
	tr := NewEndpointsChangeTracker(nil)
	require.Zero(t, tr.Generation(barNN))
	s1 := slice("bar-1", "bar", "1", "10.0.0.1")
	tr.OnEndpointSliceAdd(s1)
	g1 := tr.Generation(barNN)
	require.NotZero(t, g1)

	tr.DrainDirty()
	require.Equal(t, g1, tr.Generation(barNN), "a drain changed the generation")
	tr.OnEndpointSliceUpdate(s1, slice("bar-1", "bar", "2", "10.0.0.1"))
	require.Equal(t, g1, tr.Generation(barNN), "a metadata-only update changed the generation")

	s2 := slice("bar-1", "bar", "3", "10.0.0.2")
	tr.OnEndpointSliceUpdate(s1, s2)
	g2 := tr.Generation(barNN)
	require.NotEqual(t, g1, g2)
	tr.OnEndpointSliceAdd(slice("bar-2", "bar", "4", "10.0.0.3"))
	g3 := tr.Generation(barNN)
	require.NotEqual(t, g2, g3, "a second slice did not change the generation")

	tr.OnEndpointSliceDelete(slice("bar-2", "bar", "4"))
	require.NotEqual(t, g3, tr.Generation(barNN))
	tr.OnEndpointSliceDelete(s2)
	require.Zero(t, tr.Generation(barNN), "no slices left")
	tr.OnEndpointSliceAdd(s1)
	require.Greater(t, tr.Generation(barNN), g3, "a re-created Service reused a generation")
}

// TestSlicesForSortedAcrossChanges: a Service's slices come back sorted by name whatever the
// order they arrived, moved or left in; an update replaces its slice in place; the returned
// array is the caller's; Generation changes with every change and is 0 once the last slice is
// gone.
func TestSlicesForSortedAcrossChanges(t *testing.T) {
	tr := NewEndpointsChangeTracker(nil)
	for _, n := range []string{"bar-c", "bar-a", "bar-d", "bar-b"} {
		tr.OnEndpointSliceAdd(slice(n, "bar", "1", "10.0.0.1"))
	}
	require.Equal(t, []string{"bar-a", "bar-b", "bar-c", "bar-d"}, sliceNames(tr.SlicesFor(barNN)))
	g1 := tr.Generation(barNN)
	tr.OnEndpointSliceUpdate(slice("bar-b", "bar", "1", "10.0.0.1"), slice("bar-b", "bar", "2", "10.0.0.2"))
	got := tr.SlicesFor(barNN)
	require.Equal(t, []string{"bar-a", "bar-b", "bar-c", "bar-d"}, sliceNames(got))
	require.Equal(t, "10.0.0.2", got[1].Endpoints[0].Addr.String())
	g2 := tr.Generation(barNN)
	require.NotEqual(t, g1, g2)
	got[0] = nil // the caller's array
	require.Equal(t, "bar-a", tr.SlicesFor(barNN)[0].Name)
	tr.OnEndpointSliceDelete(slice("bar-c", "bar", "1"))
	tr.OnEndpointSliceUpdate(slice("bar-a", "bar", "1"), slice("bar-a", "other", "3", "10.0.0.3"))
	require.Equal(t, []string{"bar-b", "bar-d"}, sliceNames(tr.SlicesFor(barNN)))
	require.Equal(t, []string{"bar-a"}, sliceNames(tr.SlicesFor(types.NamespacedName{Namespace: "ns", Name: "other"})))
	require.NotEqual(t, g2, tr.Generation(barNN))
	tr.OnEndpointSliceDelete(slice("bar-b", "bar", "1"))
	tr.OnEndpointSliceDelete(slice("bar-d", "bar", "1"))
	require.Nil(t, tr.SlicesFor(barNN))
	require.Zero(t, tr.Generation(barNN))
	require.False(t, tr.Services().Has(barNN))
}

// TestLastGeneration: it moves with every change of any Service's slices and with nothing else
// (an informer resync of an unchanged slice, a drain).
func TestLastGeneration(t *testing.T) {
	tr := NewEndpointsChangeTracker(nil)
	require.Zero(t, tr.LastGeneration())
	s := slice("bar-a", "bar", "1", "10.0.0.1")
	tr.OnEndpointSliceAdd(s)
	g := tr.LastGeneration()
	require.NotZero(t, g)
	require.Equal(t, tr.Generation(barNN), g)
	tr.OnEndpointSliceUpdate(s, slice("bar-a", "bar", "2", "10.0.0.1"))
	tr.DrainDirty()
	require.Equal(t, g, tr.LastGeneration(), "a resync and a drain change nothing")
	tr.OnEndpointSliceAdd(slice("foo-a", "foo", "1", "10.0.0.2"))
	require.Greater(t, tr.LastGeneration(), g)
	g = tr.LastGeneration()
	tr.OnEndpointSliceDelete(slice("foo-a", "foo", "1"))
	require.Greater(t, tr.LastGeneration(), g)
}
