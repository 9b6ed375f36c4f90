package agent

import (
	"context"
	"path/filepath"
	"regexp"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	"github.com/antrea-proxy/antrea-proxy/pkg/httpserver"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/ofconn"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/healthcheck"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/metrics"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/observe"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/reject"
)

// observers are the parts of the agent that watch the proxier's syncs: Prometheus metrics, the
// KEP-3836 health endpoints and the healthCheckNodePort servers.
type observers struct {
	metrics  *metrics.Recorder
	health   *healthcheck.ProxyHealth
	services *healthcheck.ServiceHealthServer
	// limits are the HTTP servers' timeouts and connection caps (httplimits.go).
	limits httpLimiters
}

// newObservers builds the observers; list returns them as the proxier's observer.
func newObservers(cfg *config.AgentConfig, fullSyncPeriod time.Duration) *observers {
	o := &observers{
		metrics: metrics.NewRecorder(nil),
		health:  healthcheck.NewProxyHealth(fullSyncPeriod, nil),
		limits:  newHTTPLimiters(),
	}
	o.metrics.Registry().MustRegister(o.limits.collector(), runtimeCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	o.services = healthcheck.NewServiceHealthServer(healthcheck.ServiceOptions{
		NodeName:     cfg.NodeName,
		Limiter:      o.limits.services,
		ProxyHealthy: o.health.IsHealthy,
		OnListenError: func(e *healthcheck.ListenError) {
			klog.ErrorS(e, "Cannot serve a Service's healthCheckNodePort; retrying at the next sync", "reason", healthcheck.EventReason)
		},
	})
	return o
}

// runtimeCollector is the Go runtime's collector (go_*): the memory statistics, plus the
// runtime's own estimate of where the process's CPU time goes (/cpu/classes/: user code, the
// collector, the scavenger, idle) and its collection counts (/gc/), so that an operator can tell
// an idle agent's collections from its own work.
func runtimeCollector() prometheus.Collector {
	return collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
		collectors.MetricsGC, collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/cpu/classes/`)}))
}

// list returns the observers, then extra, as one observer of the proxier.
func (o *observers) list(extra ...observe.Observer) observe.Observers {
	return append(observe.Observers{o.metrics, o.health, o.services.Observer()}, extra...)
}

// start serves metrics and health as configured and runs the reject responder until ctx is done.
func (o *observers) start(ctx context.Context, cfg *config.AgentConfig) {
	serve := func(name, addr string, fn serveFunc, lim *httpserver.Limiter) {
		if addr == config.Off {
			return
		}
		go serveRetrying(ctx, name, addr, fn, lim, time.Second)
		klog.InfoS("Serving", "what", name, "address", addr)
	}
	serve("metrics", cfg.AntreaProxy.MetricsBindAddress, o.metrics.Serve, o.limits.metrics)
	serve("healthz", cfg.AntreaProxy.HealthzBindAddress, o.health.Serve, o.limits.health)

	// New connections to a Service port without endpoints reach the reject responder through the
	// bridge's management socket; it answers with a TCP reset or an ICMP unreachable.
	l := cfg.AntreaProxy.RateLimits.WithDefaults()
	r := reject.New(reject.Config{Accept: rejectAccept(),
		Rate: float64(l.RejectRate), Burst: l.RejectBurst, SourceRate: float64(l.RejectSourceRate), SourceBurst: l.RejectSourceBurst,
		Sources: l.RejectSources})
	o.metrics.Registry().MustRegister(r.Collector(metrics.Namespace))
	mgmt := "unix:" + filepath.Join(cfg.OVSRunDir, cfg.OVSBridge+".mgmt")
	go r.Run(ctx, reject.DialOpenFlow(mgmt, ofconn.Options{}))
	go func() {
		<-ctx.Done()
		o.services.Close()
	}()
}

// serveFunc serves on addr until ctx is done or it fails (e.g. the address is in use).
type serveFunc func(ctx context.Context, addr string, lim *httpserver.Limiter) error

// serveRetrying runs fn until ctx is done, starting it again after a failure with a backoff
// from initial doubling to 30 s: a port that another process holds (kube-proxy's 10256 and
// 10249 while a cluster migrates from it) is served as soon as that process lets it go.
func serveRetrying(ctx context.Context, name, addr string, fn serveFunc, lim *httpserver.Limiter, initial time.Duration) {
	backoff := initial
	for {
		err := fn(ctx, addr, lim)
		if ctx.Err() != nil {
			return
		}
		klog.ErrorS(err, "Serving failed; retrying", "what", name, "address", addr, "retryIn", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}
