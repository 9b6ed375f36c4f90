package agent

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/antrea-proxy/antrea-proxy/pkg/httpserver"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/healthcheck"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/metrics"
)

// httpLimiters are the timeouts and connection caps of the agent's HTTP servers that clients
// off the node may reach: /metrics, /healthz and /livez, and the healthCheckNodePorts (one cap
// for all of them). Their open and rejected connections are metrics
// (antrea_proxy_http_open_connections, antrea_proxy_http_connections_rejected_total).
type httpLimiters struct {
	metrics, health, services *httpserver.Limiter
}

func newHTTPLimiters() httpLimiters {
	return httpLimiters{
		metrics:  httpserver.DefaultLimiter("metrics"),
		health:   httpserver.DefaultLimiter("healthz"),
		services: healthcheck.DefaultServiceLimiter(),
	}
}

func (l httpLimiters) collector() prometheus.Collector {
	return httpserver.Collector(metrics.Namespace, l.metrics, l.health, l.services)
}
