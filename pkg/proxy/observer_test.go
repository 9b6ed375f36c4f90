package proxy

import (
	"errors"
	"testing"

	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"

	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/metrics"
)

// gauge reads one unlabelled gauge or counter (or a labelled one with the given label value).
func metricValue(t *testing.T, r *metrics.Recorder, name, label string) float64 {
	t.Helper()
	families, err := r.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if label != "" && !hasLabelValue(m, label) {
				continue
			}
			switch {
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("metric %s{%s} not found", name, label)
	return 0
}

func hasLabelValue(m *dto.Metric, v string) bool {
	for _, l := range m.GetLabel() {
		if l.GetValue() == v {
			return true
		}
	}
	return false
}

// TestSyncFeedsMetrics: the proxier reports each sync to its observer; the Prometheus recorder
// then shows what is installed, failures and Services without local endpoints.
func TestSyncFeedsMetrics(t *testing.T) {
	rec := metrics.NewRecorder(nil)
	opts := testOptions()
	opts.Observer = rec
	h := newHarness(t, opts)
	h.addService(makeService("ns1", "web", "10.96.0.10"))
	h.addSlice(makeSlice("ns1", "web", "web-1", 8080, v1.ProtocolTCP, "http", twoEndpoints()...))
	h.addService(makeService("ns1", "lonely", "10.96.0.11", withNodePort(30090), withETPLocal))
	h.addSlice(makeSlice("ns1", "lonely", "lonely-1", 8080, v1.ProtocolTCP, "http", ep{ip: "10.10.2.9", node: "node-b", ready: true}))
	h.sync()

	if got := metricValue(t, rec, "antrea_proxy_services_installed", ""); got != 2 {
		t.Errorf("services_installed = %v, want 2", got)
	}
	if got, want := metricValue(t, rec, "antrea_proxy_flows_installed", ""), float64(h.bridge.FlowCount()); got != want {
		t.Errorf("flows_installed = %v, want %v (the bridge's count)", got, want)
	}
	if got, want := metricValue(t, rec, "antrea_proxy_groups_installed", ""), float64(h.bridge.GroupCount()); got != want {
		t.Errorf("groups_installed = %v, want %v (the bridge's count)", got, want)
	}
	if got := metricValue(t, rec, "antrea_proxy_sync_proxy_rules_no_local_endpoints_total", metrics.TrafficPolicyExternal); got != 1 {
		t.Errorf("no_local_endpoints_total{external} = %v, want 1", got)
	}

	h.addService(makeService("ns1", "more", "10.96.0.12"))
	h.bridge.FailNextApply(errors.New("injected"))
	if err := h.p.SyncNow(t.Context(), false); err == nil {
		t.Fatal("want the injected failure")
	}
	if got := metricValue(t, rec, "antrea_proxy_sync_failures_total", ""); got != 1 {
		t.Errorf("sync_failures_total = %v, want 1", got)
	}
	if got := metricValue(t, rec, "antrea_proxy_services_installed", ""); got != 2 {
		t.Errorf("a failed sync changed services_installed to %v", got)
	}
}
