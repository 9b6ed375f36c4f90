package agent

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/httpserver"
)

// TestServeRetryingTakesThePortWhenFreed: a server whose port another process holds (kube-proxy's
// healthz port during a migration) serves once the port is free, without an agent restart.
func TestServeRetryingTakesThePortWhenFreed(t *testing.T) {
	holder, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := holder.Addr().String()
	var attempts atomic.Int32
	fn := func(ctx context.Context, addr string, _ *httpserver.Limiter) error {
		attempts.Add(1)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })}
		go func() { <-ctx.Done(); _ = srv.Close() }()
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { serveRetrying(ctx, "healthz", addr, fn, nil, 10*time.Millisecond); close(done) }()
	defer func() { cancel(); <-done }()
	require.Eventually(t, func() bool { return attempts.Load() >= 2 }, 5*time.Second, 5*time.Millisecond, "retried while the port is held")
	require.NoError(t, holder.Close())
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 10*time.Second, 10*time.Millisecond, "served once the port was freed")
}
