package tracker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
)

func requireSignal(t *testing.T, tr *Tracker) {
	t.Helper()
	select {
	case <-tr.Notify():
	case <-time.After(time.Second):
		t.Fatal("no change notification")
	}
}

func requireNoSignal(t *testing.T, tr *Tracker) {
	t.Helper()
	select {
	case <-tr.Notify():
		t.Fatal("unexpected change notification")
	default:
	}
}

func TestTrackerPendingAndDrain(t *testing.T) {
	tr := New()
	requireNoSignal(t, tr)

	tr.Services.OnServiceAdd(svc("foo", "u1", "1", tcp("http", 80)))
	tr.Endpoints.OnEndpointSliceAdd(slice("bar-1", "bar", "1", "10.0.0.1"))
	tr.Endpoints.OnEndpointSliceAdd(slice("foo-1", "foo", "1", "10.0.0.2"))
	requireSignal(t, tr) // three changes coalesce into one signal
	requireNoSignal(t, tr)

	require.Equal(t, sets.New(fooNN, barNN), tr.PendingServices())
	d := tr.Drain()
	require.Equal(t, sets.New(fooNN), sets.KeySet(d.ServiceChanges))
	require.Equal(t, sets.New(fooNN, barNN), d.DirtyEndpoints)
	require.Equal(t, sets.New(fooNN, barNN), d.Services())
	require.Empty(t, tr.PendingServices())
	require.Len(t, tr.Endpoints.SlicesFor(barNN), 1)
}

func TestTrackerInformerHandlers(t *testing.T) {
	tr := New()
	sh, eh := tr.ServiceHandler(), tr.EndpointSliceHandler()

	a := svc("foo", "u1", "1", tcp("http", 80))
	sh.OnAdd(a, true)
	s := slice("foo-1", "foo", "1", "10.0.0.1")
	eh.OnAdd(s, true)
	tr.Drain()

	b := svc("foo", "u1", "2", tcp("http", 81))
	sh.OnUpdate(a, b)
	require.Equal(t, map[types.NamespacedName]ServiceChange{fooNN: {Previous: a, Current: b}}, tr.Services.Drain())

	// Tombstones from a relist are unwrapped.
	sh.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/foo", Obj: b})
	eh.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/foo-1", Obj: s})
	d := tr.Drain()
	require.Equal(t, map[types.NamespacedName]ServiceChange{fooNN: {Previous: b, Current: nil}}, d.ServiceChanges)
	require.Equal(t, sets.New(fooNN), d.DirtyEndpoints)
	require.Nil(t, tr.Endpoints.SlicesFor(fooNN))

	// Objects of the wrong type are ignored.
	sh.OnAdd(s, false)
	eh.OnAdd(a, false)
	sh.OnDelete(cache.DeletedFinalStateUnknown{Key: "x", Obj: "junk"})
	eh.OnUpdate(nil, s)
	require.Empty(t, tr.PendingServices())
}

// TestEndpointSliceHandlerTakesCompactSlices: the agent's informer hands the handler slices in
// their compact form (model.EndpointSlice), also inside tombstones, and mixes forms across an
// update after a restart of the informer.
func TestEndpointSliceHandlerTakesCompactSlices(t *testing.T) {
	tr := New()
	eh := tr.EndpointSliceHandler()
	c1 := model.NewEndpointSlice(slice("foo-1", "foo", "1", "10.0.0.1"))
	eh.OnAdd(c1, true)
	require.Same(t, c1, tr.Endpoints.SlicesFor(fooNN)[0], "the compact slice is kept as it is")
	require.Equal(t, sets.New(fooNN), tr.Drain().DirtyEndpoints)

	eh.OnUpdate(c1, slice("foo-1", "foo", "2", "10.0.0.2"))
	require.Equal(t, "10.0.0.2", tr.Endpoints.SlicesFor(fooNN)[0].Endpoints[0].Addr.String())
	require.Equal(t, sets.New(fooNN), tr.Drain().DirtyEndpoints)

	c3 := model.NewEndpointSlice(slice("foo-1", "foo", "3", "10.0.0.2"))
	eh.OnUpdate(tr.Endpoints.SlicesFor(fooNN)[0], c3)
	require.Empty(t, tr.Drain().DirtyEndpoints, "an unchanged slice in the other form is not a change")

	eh.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/foo-1", Obj: c3})
	require.Equal(t, sets.New(fooNN), tr.Drain().DirtyEndpoints)
	require.Nil(t, tr.Endpoints.SlicesFor(fooNN))
}
