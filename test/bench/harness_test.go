//go:build bench

package bench

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
)

// TestLoaderChoice: the API loader up to 30,000 Services and the etcd loader above unless
// BENCH_LOADER says; a /12 Service CIDR above 60,000; every bad setting reported.
func TestLoaderChoice(t *testing.T) {
	c := config{}
	c.Defaults()
	require.Equal(t, "api", c.loaderFor(30000))
	require.Equal(t, "etcd", c.loaderFor(30001))
	c.Loader = "etcd"
	require.Equal(t, "etcd", c.loaderFor(1000))
	require.Equal(t, "10.96.0.0/16", serviceCIDRFor(60000))
	require.Equal(t, "10.96.0.0/12", serviceCIDRFor(100000))
	require.Less(t, 100000+256, 1<<20, "100k Services fit the /12")
	c.Loader, c.Sizes = "kubectl", []int{2000000}
	err := c.Validate()
	require.ErrorContains(t, err, "BENCH_LOADER")
	require.ErrorContains(t, err, "size 2000000")
}

// TestTenthRecorderSteps: a writer that reports its progress in steps (the etcd loader, per
// transaction) still yields one record per tenth, the last at n.
func TestTenthRecorderSteps(t *testing.T) {
	r := newTenthRecorder(1000, time.Now(), &cpuWatch{pids: map[string]int{"self": os.Getpid()}})
	for d := 64; d < 1000; d += 64 {
		r.done(d)
	}
	r.done(1000)
	got := r.result()
	require.Len(t, got, 10)
	require.Equal(t, 128, got[0].Services, "the first step past 100")
	require.Equal(t, 1000, got[9].Services)
}

// TestFreeClusterIPs: addresses from the 256th of the range on, skipping taken ones; too small a
// range is an error.
func TestFreeClusterIPs(t *testing.T) {
	cidr := netip.MustParsePrefix("10.96.0.0/16")
	got, err := freeClusterIPs(cidr, map[string]bool{"10.96.1.1": true}, 3)
	require.NoError(t, err)
	require.Equal(t, []netip.Addr{netip.MustParseAddr("10.96.1.0"), netip.MustParseAddr("10.96.1.2"), netip.MustParseAddr("10.96.1.3")}, got)
	_, err = freeClusterIPs(netip.MustParsePrefix("10.96.0.0/24"), nil, 10)
	require.Error(t, err, "a /24 has nothing from its 256th address on")
}

// TestEtcdWriterStoresWhatKubeAPIServerReads: the writer puts protobuf-enveloped objects under
// kube-apiserver's keys through etcd's JSON gateway, in transactions of at most 128 puts, and
// the values decode back to the Service and IPAddress it was given.
func TestEtcdWriterStoresWhatKubeAPIServerReads(t *testing.T) {
	type put struct{ Key, Value string }
	var puts []put
	var txnSizes []int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/v3/kv/txn", r.URL.Path)
		var body struct {
			Success []struct {
				RequestPut put `json:"request_put"`
			} `json:"success"`
		}
		b, _ := io.ReadAll(r.Body)
		require.NoError(t, json.Unmarshal(b, &body))
		txnSizes = append(txnSizes, len(body.Success))
		for _, op := range body.Success {
			k, _ := base64.StdEncoding.DecodeString(op.RequestPut.Key)
			v, _ := base64.StdEncoding.DecodeString(op.RequestPut.Value)
			puts = append(puts, put{string(k), string(v)})
		}
		_, _ = w.Write([]byte(`{"header":{},"succeeded":true,"responses":[` + strings.Repeat(`{"response_put":{}},`, len(body.Success)-1) + `{"response_put":{}}]}`))
	}))
	defer srv.Close()
	w := newEtcdWriter(srv.URL)
	ips, err := freeClusterIPs(netip.MustParsePrefix("10.96.0.0/16"), nil, 200)
	require.NoError(t, err)
	out := make([]benchService, len(ips))
	seen := false
	require.NoError(t, writeServicesToEtcd(context.Background(), w, ips, 1, out, func() error { seen = true; return nil }, func(int) {}))
	require.True(t, seen)
	require.Equal(t, []int{128, 72, 128, 72}, txnSizes, "the IPAddress objects, then the Services")
	require.Len(t, puts, 400)
	require.Equal(t, "/registry/ipaddresses/10.96.1.0", puts[0].Key)
	require.Equal(t, "/registry/services/specs/bench/svc-00000", puts[200].Key)
	require.Equal(t, benchService{Name: "svc-00199", ClusterIP: "10.96.1.199"}, out[199])

	decode := func(v string) runtime.Object {
		require.True(t, bytes.HasPrefix([]byte(v), []byte("k8s\x00")), "kube-apiserver's protobuf envelope")
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(v), nil, nil)
		require.NoError(t, err)
		return obj
	}
	svc := decode(puts[200].Value).(*corev1.Service)
	require.Equal(t, "10.96.1.0", svc.Spec.ClusterIP)
	require.Equal(t, []corev1.IPFamily{corev1.IPv4Protocol}, svc.Spec.IPFamilies)
	require.Equal(t, int32(servicePort), svc.Spec.Ports[0].TargetPort.IntVal)
	require.NotEmpty(t, svc.UID)
	ip := decode(puts[0].Value).(*networkingv1.IPAddress)
	require.Equal(t, "svc-00000", ip.Spec.ParentRef.Name)
	require.Equal(t, ipAllocatorManager, ip.Labels[networkingv1.LabelManagedBy])
	require.False(t, ip.CreationTimestamp.IsZero())
}

// TestFormatReportAgentOnly: without kube-proxy its column says "not run" and no ratio is
// given; the replay and the etcd loader are reported.
func TestFormatReportAgentOnly(t *testing.T) {
	res := []*result{{Programmed: 3 * time.Second, RSS: 500}, {}}
	sr := sizeResult{Services: 100000, Endpoints: 10, AgentOnly: true, Load: loadStats{Loader: "etcd", Took: time.Minute},
		Replay: replayResult{Flows: 200060, Took: 4 * time.Second, RestoreWaitCleared: 4100 * time.Millisecond}}
	sr.Figures = figures(sr.Services, res, floorResult{}, sr.Replay)
	out := formatReport(sr)
	require.Contains(t, out, "| start → all Services programmed | 3.00 s | not run | – |")
	require.Contains(t, out, "| replay after an ovs-vswitchd restart (OpenFlow up → every flow back) | 4.00 s | – | – |")
	require.Contains(t, out, "all 200060 flows back 4s")
	require.Contains(t, out, "written into etcd")
}
