package proxy

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/conntrack"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/openflowtest"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// fakeConntrack is a connection tracker in memory: Dump lists a zone, Delete removes the entry
// with the same zone and original tuple, as dpctl/flush-conntrack with a full tuple does.
type fakeConntrack struct {
	mu      sync.Mutex
	entries []conntrack.Entry
	deleted []string
	dumps   int
}

func (f *fakeConntrack) Dump(_ context.Context, zone uint16) ([]conntrack.Entry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dumps++
	var out []conntrack.Entry
	for _, e := range f.entries {
		if e.Zone == zone {
			out = append(out, e)
		}
	}
	return out, nil
}

func (f *fakeConntrack) Delete(_ context.Context, e conntrack.Entry) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.entries = slices.DeleteFunc(f.entries, func(x conntrack.Entry) bool { return x.Zone == e.Zone && x.Orig == e.Orig })
	f.deleted = append(f.deleted, e.String())
	return nil
}

func (f *fakeConntrack) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.deleted
	f.deleted = nil
	slices.Sort(out)
	return out
}

// ctEntry is a UDP entry of the IPv4 Service zone from client:sport to dst, answered by reply
// (the endpoint, or dst itself when untranslated).
func ctEntry(client string, sport uint16, dst, reply string) conntrack.Entry {
	d, r := netip.MustParseAddrPort(dst), netip.MustParseAddrPort(reply)
	c := netip.MustParseAddr(client)
	return conntrack.Entry{Zone: pipeline.ZoneServiceV4, Proto: conntrack.ProtoUDP,
		Orig:  conntrack.Tuple{Src: c, Dst: d.Addr(), SrcPort: sport, DstPort: d.Port()},
		Reply: conntrack.Tuple{Src: r.Addr(), Dst: c, SrcPort: r.Port(), DstPort: sport}}
}

func newCTHarness(t *testing.T, ct *fakeConntrack) *harness {
	t.Helper()
	opts := testOptions()
	opts.Conntrack = ct
	b := openflowtest.NewFakeBridge()
	p, err := New(opts, b)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, p: p, bridge: b}
	h.p.OnNodeUpdate(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}, Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.168.77.10"}}}})
	return h
}

// TestUDPConntrackReconciler: after each step the reconciler deleted exactly the entries
// listed, and the entries that still match what the Services serve survive every step,
// including a restart of the agent (a new proxier with nothing committed).
func TestUDPConntrackReconciler(t *testing.T) {
	dns := makeService("kube-system", "dns", "10.96.0.53", withPorts(v1.ServicePort{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP, NodePort: 30053}),
		func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeNodePort })
	stats := makeService("default", "stats", "10.96.0.99", withPorts(v1.ServicePort{Name: "dns", Port: 8125, Protocol: v1.ProtocolUDP}))
	web := makeService("default", "web", "10.96.0.80")
	dns1 := makeSlice("kube-system", "dns", "dns-1", 5353, v1.ProtocolUDP, "dns", ep{ip: "10.10.1.5", node: testNode, ready: true}, ep{ip: "10.10.1.6", node: testNode, ready: true})
	// The stats Service selects the same pod and port as dns: its entries are not dns's.
	stats1 := makeSlice("default", "stats", "stats-1", 5353, v1.ProtocolUDP, "dns", ep{ip: "10.10.1.5", node: testNode, ready: true})

	ct := &fakeConntrack{entries: []conntrack.Entry{
		ctEntry("10.10.2.1", 4001, "10.96.0.53:53", "10.10.1.5:5353"),       // serving: stays
		ctEntry("10.10.2.2", 4002, "10.96.0.53:53", "10.10.1.6:5353"),       // serving: stays
		ctEntry("10.10.2.3", 4003, "192.168.77.10:30053", "10.10.1.5:5353"), // NodePort, serving: stays
		ctEntry("10.10.2.4", 4004, "10.96.0.53:53", "10.10.1.9:5353"),       // endpoint gone while the agent was down
		ctEntry("10.10.2.5", 4005, "10.96.0.77:53", "10.10.1.5:5353"),       // Service gone while the agent was down
		ctEntry("10.10.2.6", 4006, "10.96.0.99:8125", "10.10.1.5:5353"),     // stats, serving: stays
		ctEntry("10.10.2.7", 4007, "10.10.1.5:5353", "10.10.1.5:5353"),      // pod-to-pod, untranslated: not a Service's
		// NodePort traffic from the host or from outside: the host DNATs it to the NodePort
		// virtual IP before it enters OVS. Serving: stays.
		ctEntry("10.10.2.10", 4010, "169.254.0.252:30053", "10.10.1.6:5353"),
	}}
	tcp := ctEntry("10.10.2.8", 4008, "10.96.0.80:80", "10.10.1.7:8080")
	tcp.Proto = conntrack.ProtoTCP
	other := ctEntry("10.10.2.9", 4009, "10.96.0.53:53", "10.10.1.9:5353")
	other.Zone = pipeline.ZoneSNATV4
	ct.entries = append(ct.entries, tcp, other)

	h := newCTHarness(t, ct)
	for _, o := range []any{dns, stats, web} {
		h.addService(o.(*v1.Service))
	}
	h.addSlice(dns1)
	h.addSlice(stats1)
	h.sync()
	steps := []struct {
		name string
		do   func()
		want []string
	}{
		{"first sync after a start", func() {}, []string{
			ctEntry("10.10.2.4", 4004, "10.96.0.53:53", "10.10.1.9:5353").String(),
			ctEntry("10.10.2.5", 4005, "10.96.0.77:53", "10.10.1.5:5353").String(),
		}},
		{"an endpoint leaves dns", func() {
			h.updateSlice(dns1, makeSlice("kube-system", "dns", "dns-1", 5353, v1.ProtocolUDP, "dns", ep{ip: "10.10.1.6", node: testNode, ready: true}))
		}, []string{
			ctEntry("10.10.2.1", 4001, "10.96.0.53:53", "10.10.1.5:5353").String(),
			ctEntry("10.10.2.3", 4003, "192.168.77.10:30053", "10.10.1.5:5353").String(),
		}},
		{"the stats Service is deleted", func() { h.deleteService(stats) }, []string{
			ctEntry("10.10.2.6", 4006, "10.96.0.99:8125", "10.10.1.5:5353").String(),
		}},
		{"nothing changed: a partial sync does not list conntrack", func() {}, nil},
	}
	for _, s := range steps {
		s.do()
		dumps := ct.dumps
		h.sync()
		if diff := cmp.Diff(s.want, ct.take()); diff != "" {
			t.Fatalf("%s: deleted entries (-want +got):\n%s", s.name, diff)
		}
		if s.want == nil && ct.dumps != dumps {
			t.Errorf("%s: %d dumps, want none", s.name, ct.dumps-dumps)
		}
	}
	want := []string{
		ctEntry("10.10.2.2", 4002, "10.96.0.53:53", "10.10.1.6:5353").String(),
		ctEntry("10.10.2.7", 4007, "10.10.1.5:5353", "10.10.1.5:5353").String(),
		ctEntry("10.10.2.10", 4010, "169.254.0.252:30053", "10.10.1.6:5353").String(),
		tcp.String(), other.String(),
	}
	var left []string
	for _, e := range ct.entries {
		left = append(left, e.String())
	}
	slices.Sort(left)
	slices.Sort(want)
	if diff := cmp.Diff(want, left); diff != "" {
		t.Fatalf("entries left (-want +got):\n%s", diff)
	}

	// A restart: a new proxier with the same Services deletes nothing that is still valid.
	h2 := newCTHarness(t, ct)
	h2.addService(dns)
	h2.addService(web)
	h2.addSlice(makeSlice("kube-system", "dns", "dns-1", 5353, v1.ProtocolUDP, "dns", ep{ip: "10.10.1.6", node: testNode, ready: true}))
	h2.sync()
	if got := ct.take(); len(got) != 0 {
		t.Fatalf("the first sync after a restart deleted valid entries: %v", got)
	}
}

// TestUDPConntrackFirstEndpoints: an entry committed untranslated while the port had no
// endpoint is deleted once it has one; while it has none, it stays.
func TestUDPConntrackFirstEndpoints(t *testing.T) {
	dns := makeService("kube-system", "dns", "10.96.0.53", withPorts(v1.ServicePort{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP}))
	pending := ctEntry("10.10.2.1", 4001, "10.96.0.53:53", "10.96.0.53:53")
	ct := &fakeConntrack{entries: []conntrack.Entry{pending}}
	h := newCTHarness(t, ct)
	h.addService(dns)
	h.sync()
	if got := ct.take(); len(got) != 0 {
		t.Fatalf("no endpoint yet: deleted %v", got)
	}
	h.addSlice(makeSlice("kube-system", "dns", "dns-1", 5353, v1.ProtocolUDP, "dns", ep{ip: "10.10.1.5", node: testNode, ready: true}))
	h.sync()
	if diff := cmp.Diff([]string{pending.String()}, ct.take()); diff != "" {
		t.Fatalf("first endpoint: deleted (-want +got):\n%s", diff)
	}
}

// TestUDPConntrackIdleFullResyncs: the first sync of a start lists conntrack; a periodic full
// resync does so only while a UDP Service port is installed (or the last run failed).
func TestUDPConntrackIdleFullResyncs(t *testing.T) {
	ct := &fakeConntrack{}
	h := newCTHarness(t, ct)
	h.addService(makeService("default", "web", "10.96.0.80"))
	h.sync()
	require.Equal(t, 1, ct.dumps, "the first sync of a start lists the IPv4 Service zone")
	for i := 0; i < 3; i++ {
		require.NoError(t, h.p.SyncNow(context.Background(), true))
	}
	require.Equal(t, 1, ct.dumps, "idle full resyncs without a UDP port list nothing")
	h.addService(makeService("kube-system", "dns", "10.96.0.53", withPorts(v1.ServicePort{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP})))
	h.sync()
	require.Equal(t, 2, ct.dumps, "a new UDP port is reconciled")
	require.NoError(t, h.p.SyncNow(context.Background(), true))
	require.Equal(t, 3, ct.dumps, "with a UDP port, a full resync reconciles")
}
