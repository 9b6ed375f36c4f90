package loadbalancer

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	"github.com/antrea-proxy/antrea-proxy/pkg/lbapi"
)

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

// samples returns the sample lines of the metrics whose name starts
// with prefix.
func samples(body, prefix string) []string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// TestMetricsFromState: allocation and release counters follow the
// syncs; pool gauges, waiting Services and Services by condition are
// read from the state at scrape time.
func TestMetricsFromState(t *testing.T) {
	h := newHarness(t, testPools(), readyNode("node-a", nil))
	h.create(lbService("a"))
	h.create(lbService("b", withPool("proxy")))
	h.create(lbService("c", withPool("proxy")))
	require.Equal(t, []string{"10.0.0.1"}, ingressIPs(h.sync("a")))
	require.Equal(t, []string{"192.0.2.1"}, ingressIPs(h.sync("b")))
	require.Empty(t, ingressIPs(h.sync("c")))
	h.update("a", toClusterIP)
	h.settle("a")
	h.sync("a")
	// A refused Service is handed nothing: no allocation is counted.
	h.create(lbService("r", withAnn(lbapi.AnnotationRequiredFeatures, "no-such-feature")))
	require.Empty(t, ingressIPs(h.sync("r")))
	h.settle("b", "c", "r") // the condition gauges read the informer's copies

	srv := NewHTTPHandler(HTTPOptions{Controller: h.ctrl, Metrics: h.ctrl.metrics})
	code, body := get(t, srv, "/metrics")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, []string{
		`antrea_controller_lb_allocations_total{pool="proxy"} 1`,
		`antrea_controller_lb_allocations_total{pool="vip"} 1`,
	}, samples(body, "antrea_controller_lb_allocations_total"))
	require.Equal(t, []string{`antrea_controller_lb_releases_total{pool="vip"} 1`}, samples(body, "antrea_controller_lb_releases_total"))
	require.Equal(t, []string{
		`antrea_controller_lb_pool_addresses{pool="proxy"} 1`,
		`antrea_controller_lb_pool_addresses{pool="proxy-ranges"} 1`,
		`antrea_controller_lb_pool_addresses{pool="sel"} 1`,
		`antrea_controller_lb_pool_addresses{pool="vip"} 4`,
		`antrea_controller_lb_pool_addresses_used{pool="proxy"} 1`,
		`antrea_controller_lb_pool_addresses_used{pool="proxy-ranges"} 0`,
		`antrea_controller_lb_pool_addresses_used{pool="sel"} 0`,
		`antrea_controller_lb_pool_addresses_used{pool="vip"} 0`,
	}, samples(body, "antrea_controller_lb_pool_addresses"))
	require.Equal(t, []string{`antrea_controller_lb_waiting_services 1`}, samples(body, "antrea_controller_lb_waiting_services"))
	// b serves, c waits on the exhausted pool, r is refused; a is a ClusterIP Service now.
	require.Equal(t, []string{
		`antrea_controller_lb_services{condition="LoadBalancerProvisioning",reason="Complete",status="False"} 3`,
		`antrea_controller_lb_services{condition="LoadBalancerServing",reason="Infrastructure",status="False"} 1`,
		`antrea_controller_lb_services{condition="LoadBalancerServing",reason="Serving",status="True"} 1`,
		`antrea_controller_lb_services{condition="LoadBalancerServing",reason="Unsupported",status="False"} 1`,
	}, samples(body, "antrea_controller_lb_services"))
}

// TestHealthzStalledSync: /healthz fails while one sync runs longer than
// the stall timeout, and recovers when it ends; the sync histogram and
// error counter count syncs run by the workers.
func TestHealthzStalledSync(t *testing.T) {
	h := newHarness(t, testPools(), readyNode("node-a", nil))
	release, entered := make(chan struct{}), make(chan struct{}, 1)
	var block atomic.Bool
	block.Store(true)
	h.client.PrependReactor("update", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
		if block.Load() {
			entered <- struct{}{}
			<-release
			return true, nil, errors.New("injected failure after a long wait")
		}
		return false, nil, nil
	})
	h.create(lbService("a"))
	h.settle("a")
	srv := NewHTTPHandler(HTTPOptions{Controller: h.ctrl, Metrics: h.ctrl.metrics})

	h.ctrl.queue.Add(types.NamespacedName{Namespace: "ns", Name: "a"})
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ctrl.processNext(h.ctx)
	}()
	select {
	case <-entered: // the sync is inside its first write
	case <-time.After(10 * time.Second):
		t.Fatal("the sync never wrote")
	}
	code, body := get(t, srv, "/healthz")
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, "ok", body)

	h.clock.Step(DefaultStallTimeout + time.Minute)
	code, body = get(t, srv, "/healthz")
	require.Equal(t, http.StatusInternalServerError, code)
	require.Contains(t, body, "[+]ping ok\n[-]workers failed: the sync of Service ns/a has been running for 3m0s (limit 2m0s)")
	code, _ = get(t, srv, "/healthz/ping")
	require.Equal(t, http.StatusOK, code)
	code, _ = get(t, srv, "/healthz/workers")
	require.Equal(t, http.StatusInternalServerError, code)

	block.Store(false)
	close(release)
	<-done
	code, body = get(t, srv, "/healthz?verbose")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "[+]ping ok\n[+]workers ok\nhealth check passed\n", body)
	_, body = get(t, srv, "/metrics")
	require.Equal(t, []string{"antrea_controller_lb_sync_duration_seconds_count 1"}, samples(body, "antrea_controller_lb_sync_duration_seconds_count"))
	require.Equal(t, []string{"antrea_controller_lb_sync_errors_total 1"}, samples(body, "antrea_controller_lb_sync_errors_total"))
}

// TestReadyz: not ready before the controller has synced and rebuilt its
// allocations; ready once Run got there. A standby is ready but not
// leader.
func TestReadyz(t *testing.T) {
	h := newHarness(t, testPools())
	var leading atomic.Bool
	m := h.ctrl.metrics
	require.NoError(t, m.RegisterLeader(leading.Load))
	standby := NewHTTPHandler(HTTPOptions{Controller: h.ctrl, Metrics: m, Leading: leading.Load})
	code, body := get(t, standby, "/readyz")
	require.Equal(t, http.StatusOK, code, "a standby is ready: %s", body)
	code, body = get(t, standby, "/readyz/leader")
	require.Equal(t, http.StatusInternalServerError, code)
	require.Contains(t, body, "[-]leader failed: standby: another replica holds the Lease")
	_, body = get(t, standby, "/metrics")
	require.Equal(t, []string{"antrea_controller_leader 0"}, samples(body, "antrea_controller_leader"))

	leading.Store(true)
	code, body = get(t, standby, "/readyz")
	require.Equal(t, http.StatusInternalServerError, code, "a leader whose controller has not synced is not ready")
	require.Contains(t, body, "[-]informer-sync failed")
	_, body = get(t, standby, "/metrics")
	require.Equal(t, []string{"antrea_controller_leader 1"}, samples(body, "antrea_controller_leader"))

	// Through Run, without leader election.
	client := fake.NewClientset(readyNode("node-a", nil))
	_, _ = apiServerLike(client, false)
	r := startController(t, client, watchesStarted(client), []config.IPPool{{Name: "one", Ranges: []string{"10.3.0.1-10.3.0.2"}}})
	srv := NewHTTPHandler(HTTPOptions{Controller: r.ctrl, Metrics: r.ctrl.metrics})
	require.Eventually(t, func() bool {
		code, _ := get(t, srv, "/readyz")
		return code == http.StatusOK
	}, 10*time.Second, 5*time.Millisecond)
	code, _ = get(t, srv, "/readyz/leader")
	require.Equal(t, http.StatusOK, code, "without leader election the replica always writes")
	_, err := client.CoreV1().Services("ns").Create(context.Background(), lbService("a"), metav1.CreateOptions{})
	require.NoError(t, err)
	waitAllServing(t, client, 1)
	r.stop()
	code, _ = get(t, srv, "/readyz")
	require.Equal(t, http.StatusInternalServerError, code, "a stopped controller is not ready")
}
