// Package metrics exports the proxier's Prometheus metrics: Recorder is an observe.Observer
// fed by the proxier after every sync.
//
// Metric names follow kube-proxy's (pkg/proxy/metrics) after the "antrea_proxy_" prefix where
// they mean the same thing; the metrics only AntreaProxy has are documented in docs/metrics.md.
// Every Recorder has its own registry: nothing here touches the global default registry.
package metrics
