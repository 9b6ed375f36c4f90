package healthcheck

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/observe"
)

var (
	svcA  = types.NamespacedName{Namespace: "ns", Name: "a"}
	svcB  = types.NamespacedName{Namespace: "ns", Name: "b"}
	lo1   = netip.MustParseAddr("127.0.0.1")
	lo2   = netip.MustParseAddr("127.0.0.2")
	httpc = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
)

// freePorts returns n distinct TCP ports that were free on 127.0.0.1 a moment ago.
func freePorts(t *testing.T, n int) []uint16 {
	t.Helper()
	var out []uint16
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		lns = append(lns, ln)
		out = append(out, uint16(ln.Addr().(*net.TCPAddr).Port))
	}
	for _, ln := range lns {
		ln.Close()
	}
	return out
}

type hcReply struct {
	code   int
	weight string
	body   serviceResponse
}

// probe GETs the health check on addr:port; ok=false when the connection is refused.
func probe(t *testing.T, addr netip.Addr, port uint16) (hcReply, bool) {
	t.Helper()
	resp, err := httpc.Get("http://" + net.JoinHostPort(addr.String(), strconv.Itoa(int(port))) + "/")
	if err != nil {
		require.True(t, errors.Is(err, syscall.ECONNREFUSED), "unexpected error: %v", err)
		return hcReply{}, false
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
	r := hcReply{code: resp.StatusCode, weight: resp.Header.Get("X-Load-Balancing-Endpoint-Weight")}
	require.NoError(t, json.Unmarshal(raw, &r.body), "body %q", raw)
	return r, true
}

func reply(code, count int, nn types.NamespacedName, healthy bool) hcReply {
	r := hcReply{code: code, weight: strconv.Itoa(count)}
	r.body.Service.Namespace, r.body.Service.Name = nn.Namespace, nn.Name
	r.body.LocalEndpoints, r.body.ServiceProxyHealthy = count, healthy
	return r
}

func newServer(t *testing.T, opts ServiceOptions) *ServiceHealthServer {
	s := NewServiceHealthServer(opts)
	t.Cleanup(s.Close)
	return s
}

func TestServiceHealthResponses(t *testing.T) {
	ports := freePorts(t, 1)
	var proxyHealthy atomic.Bool
	s := newServer(t, ServiceOptions{NodeName: "node1", Addresses: []netip.Addr{lo1}, ProxyHealthy: proxyHealthy.Load})
	require.NoError(t, s.SyncServices(map[types.NamespacedName]uint16{svcA: ports[0]}))

	steps := []struct {
		name    string
		counts  map[types.NamespacedName]int
		healthy bool
		want    hcReply
	}{
		{name: "no endpoint count yet", healthy: true, want: reply(503, 0, svcA, true)},
		{name: "one local ready endpoint", counts: map[types.NamespacedName]int{svcA: 1}, healthy: true, want: reply(200, 1, svcA, true)},
		{name: "three", counts: map[types.NamespacedName]int{svcA: 3, svcB: 1}, healthy: true, want: reply(200, 3, svcA, true)},
		{name: "proxier unhealthy", counts: map[types.NamespacedName]int{svcA: 3}, healthy: false, want: reply(503, 3, svcA, false)},
		{name: "local endpoints gone", counts: map[types.NamespacedName]int{svcB: 2}, healthy: true, want: reply(503, 0, svcA, true)},
		{name: "back", counts: map[types.NamespacedName]int{svcA: 2}, healthy: true, want: reply(200, 2, svcA, true)},
	}
	for _, st := range steps {
		s.SyncEndpoints(st.counts)
		proxyHealthy.Store(st.healthy)
		got, ok := probe(t, lo1, ports[0])
		require.True(t, ok, "%s: port closed", st.name)
		if diff := cmp.Diff(st.want, got, cmp.AllowUnexported(hcReply{})); diff != "" {
			t.Errorf("%s (-want +got):\n%s", st.name, diff)
		}
	}
}

func TestServiceHealthListenerLifecycle(t *testing.T) {
	p := freePorts(t, 3)
	s := newServer(t, ServiceOptions{NodeName: "node1", Addresses: []netip.Addr{lo1}})
	s.SyncEndpoints(map[types.NamespacedName]int{svcA: 1, svcB: 1})

	type open struct {
		addr netip.Addr
		port uint16
		nn   types.NamespacedName
	}
	steps := []struct {
		name     string
		addrs    []netip.Addr // nil: unchanged
		services map[types.NamespacedName]uint16
		open     []open // must answer for that Service
		closed   []open // must refuse connections
	}{
		{
			name:     "two Services",
			services: map[types.NamespacedName]uint16{svcA: p[0], svcB: p[1]},
			open:     []open{{lo1, p[0], svcA}, {lo1, p[1], svcB}},
			closed:   []open{{lo2, p[0], svcA}},
		},
		{
			name:     "B removed",
			services: map[types.NamespacedName]uint16{svcA: p[0]},
			open:     []open{{lo1, p[0], svcA}},
			closed:   []open{{lo1, p[1], svcB}},
		},
		{
			name:     "A moves to another port; 0 means no port",
			services: map[types.NamespacedName]uint16{svcA: p[2], svcB: 0},
			open:     []open{{lo1, p[2], svcA}},
			closed:   []open{{lo1, p[0], svcA}, {lo1, p[1], svcB}},
		},
		{
			name:     "node addresses change: reopened on the new ones",
			addrs:    []netip.Addr{lo2},
			services: map[types.NamespacedName]uint16{svcA: p[2]},
			open:     []open{{lo2, p[2], svcA}},
			closed:   []open{{lo1, p[2], svcA}},
		},
		{
			name:     "two addresses",
			addrs:    []netip.Addr{lo2, lo1},
			services: map[types.NamespacedName]uint16{svcA: p[2]},
			open:     []open{{lo1, p[2], svcA}, {lo2, p[2], svcA}},
		},
		{
			name:     "all Services gone",
			services: map[types.NamespacedName]uint16{},
			closed:   []open{{lo1, p[2], svcA}, {lo2, p[2], svcA}},
		},
	}
	for _, st := range steps {
		if st.addrs != nil {
			require.NoError(t, s.SyncNodeAddresses(st.addrs), st.name)
		}
		require.NoError(t, s.SyncServices(st.services), st.name)
		for _, o := range st.open {
			got, ok := probe(t, o.addr, o.port)
			require.True(t, ok, "%s: %s:%d should be open", st.name, o.addr, o.port)
			require.Equal(t, reply(200, 1, o.nn, true), got, st.name)
		}
		for _, c := range st.closed {
			_, ok := probe(t, c.addr, c.port)
			require.False(t, ok, "%s: %s:%d should be closed", st.name, c.addr, c.port)
		}
		want := map[types.NamespacedName]uint16{}
		for nn, port := range st.services {
			if port != 0 {
				want[nn] = port
			}
		}
		require.Equal(t, want, s.Ports(), st.name)
	}
}

func TestServiceHealthPortInUse(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	busyPort := uint16(busy.Addr().(*net.TCPAddr).Port)
	free := freePorts(t, 1)[0]

	var reported []*ListenError
	s := newServer(t, ServiceOptions{NodeName: "node1", Addresses: []netip.Addr{lo1},
		OnListenError: func(e *ListenError) { reported = append(reported, e) }})
	s.SyncEndpoints(map[types.NamespacedName]int{svcA: 1, svcB: 1})

	services := map[types.NamespacedName]uint16{svcA: busyPort, svcB: free}
	err = s.SyncServices(services)
	var lerr *ListenError
	require.ErrorAs(t, err, &lerr)
	require.Equal(t, svcA, lerr.Service)
	require.Equal(t, busyPort, lerr.Port)
	require.True(t, errors.Is(err, syscall.EADDRINUSE), "error %v should wrap EADDRINUSE", err)
	require.Contains(t, lerr.Error(), "node node1 failed to start healthcheck \"ns/a\" on port "+strconv.Itoa(int(busyPort)))
	require.Len(t, reported, 1)
	require.Equal(t, map[types.NamespacedName]uint16{svcB: free}, s.Ports(), "the other Service is served")
	_, ok := probe(t, lo1, free)
	require.True(t, ok)

	// Still busy: retried and reported again at the next sync.
	require.Error(t, s.SyncServices(services))
	require.Len(t, reported, 2)

	// Freed: the retry opens it.
	require.NoError(t, busy.Close())
	require.NoError(t, s.SyncServices(services))
	require.Len(t, reported, 2)
	got, ok := probe(t, lo1, busyPort)
	require.True(t, ok)
	require.Equal(t, reply(200, 1, svcA, true), got)
}

func TestServiceHealthObserver(t *testing.T) {
	p := freePorts(t, 2)
	s := newServer(t, ServiceOptions{NodeName: "node1"})
	o := s.Observer()
	o.SyncDone(observe.SyncResult{
		NodeAddresses: []netip.Addr{lo1},
		Services: map[types.NamespacedName]*observe.ServiceSummary{
			svcA:                               {Ports: 1, HealthCheckNodePort: p[0], LocalReady: 2},
			svcB:                               {Ports: 1, HealthCheckNodePort: p[1]},
			{Namespace: "ns", Name: "cluster"}: {Ports: 1, LocalReady: 4},
		},
	})
	require.Equal(t, map[types.NamespacedName]uint16{svcA: p[0], svcB: p[1]}, s.Ports())
	got, _ := probe(t, lo1, p[0])
	require.Equal(t, reply(200, 2, svcA, true), got)
	got, _ = probe(t, lo1, p[1])
	require.Equal(t, reply(503, 0, svcB, true), got)

	// A failed sync changes nothing.
	o.SyncDone(observe.SyncResult{Err: errors.New("x"), NodeAddresses: []netip.Addr{lo1},
		Services: map[types.NamespacedName]*observe.ServiceSummary{svcA: nil}})
	require.Len(t, s.Ports(), 2)

	// Incremental: B gets an endpoint, A is deleted; unchanged Services keep their state.
	o.SyncDone(observe.SyncResult{
		NodeAddresses: []netip.Addr{lo1},
		Services: map[types.NamespacedName]*observe.ServiceSummary{
			svcA: nil,
			svcB: {Ports: 1, HealthCheckNodePort: p[1], LocalReady: 1},
		},
	})
	require.Equal(t, map[types.NamespacedName]uint16{svcB: p[1]}, s.Ports())
	got, _ = probe(t, lo1, p[1])
	require.Equal(t, reply(200, 1, svcB, true), got)
	_, ok := probe(t, lo1, p[0])
	require.False(t, ok)
}
