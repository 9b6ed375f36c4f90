package tracker

import (
	"sort"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
)

var fooNN = types.NamespacedName{Namespace: "ns", Name: "foo"}

func svc(name, uid, rv string, ports ...v1.ServicePort) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid), ResourceVersion: rv},
		Spec: v1.ServiceSpec{
			Type: v1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
			Ports: ports,
		},
	}
}

func tcp(name string, port int32) v1.ServicePort {
	return v1.ServicePort{Name: name, Port: port, Protocol: v1.ProtocolTCP}
}

func TestServiceAddUpdateDelete(t *testing.T) {
	calls := 0
	tr := NewServiceChangeTracker(func() { calls++ })

	a := svc("foo", "u1", "1", tcp("http", 80))
	tr.OnServiceAdd(a)
	require.Equal(t, sets.New(fooNN), tr.Pending())
	got := tr.Drain()
	require.Equal(t, map[types.NamespacedName]ServiceChange{fooNN: {Previous: nil, Current: a}}, got)
	require.Empty(t, tr.Drain(), "tracker must be empty after a drain")
	require.Empty(t, tr.Pending())

	b := svc("foo", "u1", "2", tcp("http", 81))
	c := svc("foo", "u1", "3", tcp("http", 82))
	tr.OnServiceUpdate(a, b)
	tr.OnServiceUpdate(b, c)
	require.Equal(t, map[types.NamespacedName]ServiceChange{fooNN: {Previous: a, Current: c}}, tr.Changes(),
		"Previous stays the synced state across several updates")
	require.Len(t, tr.Changes(), 1, "Changes does not clear")
	require.Equal(t, map[types.NamespacedName]ServiceChange{fooNN: {Previous: a, Current: c}}, tr.Drain())

	tr.OnServiceDelete(c)
	require.Equal(t, map[types.NamespacedName]ServiceChange{fooNN: {Previous: c, Current: nil}}, tr.Drain())
	require.Equal(t, 4, calls, "onChange after every event leaving a pending change")
}

func TestServiceAddThenDeleteBeforeSyncIsNoChange(t *testing.T) {
	calls := 0
	tr := NewServiceChangeTracker(func() { calls++ })
	a := svc("foo", "u1", "1", tcp("http", 80))
	tr.OnServiceAdd(a)
	b := svc("foo", "u1", "2", tcp("http", 8080))
	tr.OnServiceUpdate(a, b)
	tr.OnServiceDelete(b)
	require.Empty(t, tr.Pending())
	require.Empty(t, tr.Drain())
	require.Equal(t, 2, calls, "the cancelling delete does not signal")
}

func TestServiceDeleteThenRecreateBeforeSync(t *testing.T) {
	tr := NewServiceChangeTracker(nil)
	orig := svc("foo", "u1", "1", tcp("http", 80))
	tr.OnServiceAdd(orig)
	tr.Drain()

	tr.OnServiceDelete(orig)
	recreated := svc("foo", "u2", "7", tcp("http", 90))
	tr.OnServiceAdd(recreated)
	require.Equal(t, map[types.NamespacedName]ServiceChange{fooNN: {Previous: orig, Current: recreated}}, tr.Drain())

	// Re-created with identical content but a new UID is still a change (a new object).
	tr.OnServiceDelete(recreated)
	again := svc("foo", "u3", "9", tcp("http", 90))
	tr.OnServiceAdd(again)
	require.Equal(t, map[types.NamespacedName]ServiceChange{fooNN: {Previous: recreated, Current: again}}, tr.Drain())
}

func TestServiceResyncAndRevertAreNoChange(t *testing.T) {
	tr := NewServiceChangeTracker(nil)
	a := svc("foo", "u1", "1", tcp("http", 80))
	tr.OnServiceAdd(a)
	tr.Drain()

	// Informer resync: same object, or only resourceVersion changed.
	tr.OnServiceUpdate(a, a)
	tr.OnServiceUpdate(a, svc("foo", "u1", "2", tcp("http", 80)))
	require.Empty(t, tr.Drain())

	// An update and its revert before a sync cancel out.
	b := svc("foo", "u1", "3", tcp("http", 81))
	tr.OnServiceUpdate(a, b)
	tr.OnServiceUpdate(b, svc("foo", "u1", "4", tcp("http", 80)))
	require.Empty(t, tr.Drain())

	// Label and status changes are changes (proxy-name label, LB ingress).
	l := svc("foo", "u1", "5", tcp("http", 80))
	l.Labels = map[string]string{model.LabelServiceProxyName: "x"}
	tr.OnServiceUpdate(a, l)
	require.Len(t, tr.Drain(), 1)
	s := svc("foo", "u1", "6", tcp("http", 80))
	s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "192.0.2.1"}}
	tr.OnServiceUpdate(l, s)
	require.Len(t, tr.Drain(), 1)
}

func portNames(ports []model.ServicePort) []string {
	var out []string
	for _, p := range ports {
		out = append(out, p.Name.String())
	}
	sort.Strings(out)
	return out
}

// A port renamed by an update: converting Previous and Current shows the old ServicePortName
// disappearing and the new one appearing.
func TestServiceRenamedPort(t *testing.T) {
	tr := NewServiceChangeTracker(nil)
	a := svc("foo", "u1", "1", tcp("http", 80), tcp("metrics", 9090))
	tr.OnServiceAdd(a)
	tr.Drain()
	b := svc("foo", "u1", "2", tcp("web", 80), tcp("metrics", 9090))
	tr.OnServiceUpdate(a, b)
	ch := tr.Drain()[fooNN]

	opts := model.ConvertOptions{Served: model.Families{IPv4: true}}
	before := portNames(model.ServicePortsFromService(ch.Previous, opts))
	after := portNames(model.ServicePortsFromService(ch.Current, opts))
	require.Equal(t, []string{"ns/foo:http/TCP", "ns/foo:metrics/TCP"}, before)
	require.Equal(t, []string{"ns/foo:metrics/TCP", "ns/foo:web/TCP"}, after)
}

func TestServiceTrackerNilIgnoredAndConcurrent(t *testing.T) {
	tr := NewServiceChangeTracker(nil)
	tr.OnServiceAdd(nil)
	tr.OnServiceUpdate(nil, nil)
	tr.OnServiceDelete(nil)
	require.Empty(t, tr.Pending())

	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			name := string(rune('a' + i))
			for j := 0; j < 200; j++ {
				s := svc(name, "u", "1", tcp("p", int32(j+1)))
				tr.OnServiceAdd(s)
				_ = tr.Pending()
				if j%3 == 0 {
					tr.Drain()
				}
				tr.OnServiceDelete(s)
			}
		}(i)
	}
	wg.Wait()
	// Whatever interleaving happened, every Service ended deleted: a pending change may only
	// describe a deletion of something a drain already reported.
	for k, c := range tr.Drain() {
		require.Nil(t, c.Current, "service %s", k)
		require.NotNil(t, c.Previous, "service %s", k)
	}
}
