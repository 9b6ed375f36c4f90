// Package httpserver runs the agent's and the controller's small HTTP servers (metrics, health,
// healthCheckNodePorts) with bounded timeouts and a cap on open connections (Limits, Limiter),
// on a listener until their context is done.
package httpserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"k8s.io/klog/v2"
)

// Serve serves h on ln with lim's timeouts and connection cap (nil: the defaults) until ctx is
// done, then shuts the server down (waiting at most 5 s for requests in flight).
func Serve(ctx context.Context, ln net.Listener, h http.Handler, lim *Limiter) error {
	if lim == nil {
		lim = DefaultLimiter(ln.Addr().String())
	}
	srv := lim.Server(h)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lim.Listener(ln)) }()
	klog.InfoS("Serving HTTP", "address", ln.Addr().String(), "server", lim.Name(), "maxConnections", lim.Limits().MaxConnections)
	select {
	case err := <-done:
		return fmt.Errorf("serving on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutting down server on %s: %w", ln.Addr(), err)
	}
	return nil
}
