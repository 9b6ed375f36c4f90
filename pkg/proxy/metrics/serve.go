package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"
)

// DefaultBindAddress is where kube-proxy serves its metrics by default.
const DefaultBindAddress = "127.0.0.1:10249"

// Handler serves the Recorder's registry in the Prometheus exposition format.
func (r *Recorder) Handler() http.Handler {
	return promhttp.HandlerFor(r.registry, promhttp.HandlerOpts{Registry: r.registry})
}

// Mux returns a ServeMux with /metrics.
func (r *Recorder) Mux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", r.Handler())
	return mux
}

// Serve listens on addr and serves /metrics until ctx is done. It returns an error naming addr
// when it cannot listen, and nil after ctx is done.
func (r *Recorder) Serve(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics server: listening on %s: %w", addr, err)
	}
	return ServeListener(ctx, ln, r.Mux())
}

// ServeListener serves h on ln until ctx is done, then shuts the server down (waiting at most
// 5 s for requests in flight).
func ServeListener(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	klog.InfoS("Serving HTTP", "address", ln.Addr().String())
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
