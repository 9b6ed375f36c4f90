package metrics

import (
	"context"
	"fmt"
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/antrea-proxy/antrea-proxy/pkg/httpserver"
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

// Serve listens on addr and serves /metrics, with lim's timeouts and connection cap (nil: the
// defaults), until ctx is done. It returns an error naming addr when it cannot listen, and nil
// after ctx is done.
func (r *Recorder) Serve(ctx context.Context, addr string, lim *httpserver.Limiter) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics server: listening on %s: %w", addr, err)
	}
	return httpserver.Serve(ctx, ln, r.Mux(), lim)
}
