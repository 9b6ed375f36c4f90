package healthcheck

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/antrea-proxy/antrea-proxy/pkg/httpserver"
)

// A load balancer's health checker keeps getting answers from a healthCheckNodePort while
// slowloris clients fill the connection cap: connections above the cap are closed at once, and
// the slow ones are dropped after the header timeout.
func TestServiceHealthCheckSurvivesSlowClients(t *testing.T) {
	lim, err := httpserver.NewLimiter("service-healthcheck", httpserver.Limits{
		ReadHeaderTimeout: time.Second, ReadTimeout: time.Second, MaxConnections: 2})
	require.NoError(t, err)
	s := NewServiceHealthServer(ServiceOptions{NodeName: "n1", Addresses: []netip.Addr{lo1}, Limiter: lim})
	t.Cleanup(s.Close)
	port := freePorts(t, 1)[0]
	require.NoError(t, s.SyncServices(map[types.NamespacedName]uint16{svcA: port}))
	s.SyncEndpoints(map[types.NamespacedName]int{svcA: 1})
	addr := net.JoinHostPort(lo1.String(), strconv.Itoa(int(port)))
	r, ok := probe(t, lo1, port)
	require.True(t, ok)
	require.Equal(t, 200, r.code)
	require.Eventually(t, func() bool { return lim.Open() == 0 }, 5*time.Second, 10*time.Millisecond)

	var slow []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		slow = append(slow, c)
	}
	require.Eventually(t, func() bool { return lim.Open() == 2 }, 5*time.Second, 10*time.Millisecond)
	_, err = httpc.Get("http://" + addr + "/")
	require.Error(t, err, "above the cap the connection is closed")
	require.NotErrorIs(t, err, syscall.ECONNREFUSED)
	require.Equal(t, uint64(1), lim.Rejected())

	for _, c := range slow {
		require.NoError(t, c.SetReadDeadline(time.Now().Add(lim.Limits().ReadHeaderTimeout+2*time.Second)))
		_, err := io.Copy(io.Discard, c)
		require.False(t, errors.Is(err, os.ErrDeadlineExceeded), "the slow connection is dropped after the header timeout")
	}
	require.Eventually(t, func() bool { return lim.Open() == 0 }, 5*time.Second, 10*time.Millisecond)
	r, ok = probe(t, lo1, port)
	require.True(t, ok)
	require.Equal(t, 200, r.code, "answered again")
}
