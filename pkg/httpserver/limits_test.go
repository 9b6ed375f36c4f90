package httpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// closedByPeer reads from c until the peer closes it (true, and how long that took) or until
// deadline passes (false). Whatever the peer sends first is read and dropped.
func closedByPeer(c net.Conn, deadline time.Time) (bool, time.Duration) {
	start := time.Now()
	if err := c.SetReadDeadline(deadline); err != nil {
		return false, 0
	}
	_, err := io.Copy(io.Discard, c)
	return !errors.Is(err, os.ErrDeadlineExceeded), time.Since(start) // EOF or a reset: closed
}

func TestLimitsDefaultsAndValidate(t *testing.T) {
	var l Limits
	l.Defaults()
	require.Equal(t, Limits{ReadHeaderTimeout: DefaultReadHeaderTimeout, ReadTimeout: DefaultReadTimeout,
		WriteTimeout: DefaultWriteTimeout, IdleTimeout: DefaultIdleTimeout, MaxConnections: DefaultMaxConnections}, l)
	require.NoError(t, l.Validate())

	err := Limits{ReadHeaderTimeout: 2 * time.Second, ReadTimeout: time.Second, WriteTimeout: -1, MaxConnections: -3}.Validate()
	require.Error(t, err)
	for _, want := range []string{"writeTimeout must be positive", "idleTimeout must be positive",
		"readHeaderTimeout 2s must not exceed readTimeout 1s", "maxConnections must be positive, not -3"} {
		require.ErrorContains(t, err, want)
	}
	_, err = NewLimiter("x", Limits{MaxConnections: -1})
	require.ErrorContains(t, err, "HTTP server x: maxConnections must be positive")
}

// serveTest serves h on 127.0.0.1 with lim until the test ends and returns the address.
func serveTest(t *testing.T, lim *Limiter, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, h, lim) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return ln.Addr().String()
}

func okHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "ok")
	})
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// get does one request on a new connection; it fails when the connection is closed without
// an answer.
func get(addr string) (string, error) {
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + addr + "/")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// Slowloris clients: one that sends nothing, one that sends its headers a byte at a time, one
// that trickles its body, and one that keeps an idle connection after a request. Each is
// disconnected within its timeout (plus scheduling slack), not held open.
func TestSlowClientsAreDisconnected(t *testing.T) {
	lim, err := NewLimiter("test", Limits{ReadHeaderTimeout: 300 * time.Millisecond, ReadTimeout: 600 * time.Millisecond,
		WriteTimeout: time.Second, IdleTimeout: 400 * time.Millisecond, MaxConnections: 10})
	require.NoError(t, err)
	addr := serveTest(t, lim, okHandler())
	const slack = 2 * time.Second

	trickle := func(c net.Conn, data string, stop <-chan struct{}) {
		for i := range len(data) {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if _, err := c.Write([]byte{data[i]}); err != nil {
				return
			}
		}
	}
	cases := map[string]struct {
		send  func(c net.Conn, stop <-chan struct{})
		limit time.Duration
	}{
		"silent": {func(net.Conn, <-chan struct{}) {}, lim.Limits().ReadHeaderTimeout},
		"slow headers": {func(c net.Conn, stop <-chan struct{}) {
			trickle(c, "GET / HTTP/1.1\r\nHost: x\r\nX-Slow: "+strings.Repeat("a", 200)+"\r\n\r\n", stop)
		}, lim.Limits().ReadHeaderTimeout},
		"slow body": {func(c net.Conn, stop <-chan struct{}) {
			_, _ = io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
			trickle(c, strings.Repeat("b", 1000), stop)
		}, lim.Limits().ReadTimeout},
		"idle keep-alive": {func(c net.Conn, _ <-chan struct{}) {
			_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		}, lim.Limits().IdleTimeout + lim.Limits().ReadHeaderTimeout},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := dial(t, addr)
			stop := make(chan struct{})
			defer close(stop)
			go tc.send(c, stop)
			closed, after := closedByPeer(c, time.Now().Add(tc.limit+slack))
			require.True(t, closed, "still open after %v", after)
			t.Logf("%s: closed by the server after %v (limit %v)", name, after, tc.limit)
		})
	}
	require.Eventually(t, func() bool { return lim.Open() == 0 }, 5*time.Second, 10*time.Millisecond)
}

// Above the cap, new connections are closed at once and counted; once the slow connections
// that filled it are dropped (header timeout), a normal health check is answered again.
func TestConnectionCap(t *testing.T) {
	lim, err := NewLimiter("capped", Limits{ReadHeaderTimeout: 3 * time.Second, ReadTimeout: 3 * time.Second,
		MaxConnections: 3})
	require.NoError(t, err)
	addr := serveTest(t, lim, okHandler())
	body, err := get(addr)
	require.NoError(t, err)
	require.Equal(t, "ok", body)
	require.Eventually(t, func() bool { return lim.Open() == 0 }, 5*time.Second, 10*time.Millisecond)

	slow := make([]net.Conn, 3)
	for i := range slow {
		slow[i] = dial(t, addr)
	}
	require.Eventually(t, func() bool { return lim.Open() == 3 }, 5*time.Second, 10*time.Millisecond)

	extra := dial(t, addr)
	closed, after := closedByPeer(extra, time.Now().Add(2*time.Second))
	require.True(t, closed, "a connection above the cap is closed at once, not after the header timeout")
	t.Logf("connection above the cap closed after %v", after)
	_, err = get(addr)
	require.Error(t, err, "a health check while the cap is full gets its connection closed")
	require.Equal(t, uint64(2), lim.Rejected())

	for _, c := range slow {
		closed, _ := closedByPeer(c, time.Now().Add(lim.Limits().ReadHeaderTimeout+2*time.Second))
		require.True(t, closed, "slow connection dropped after the header timeout")
	}
	require.Eventually(t, func() bool {
		body, err := get(addr)
		return err == nil && body == "ok"
	}, 5*time.Second, 50*time.Millisecond, "answered again once the slow connections are gone")
	require.NoError(t, testutil.CollectAndCompare(Collector("ns", lim), strings.NewReader(fmt.Sprintf(`
# HELP ns_http_connections_rejected_total Connections closed at once because the server's connection cap was reached, by server.
# TYPE ns_http_connections_rejected_total counter
ns_http_connections_rejected_total{server="capped"} %d
`, lim.Rejected())), "ns_http_connections_rejected_total"))
}
