package apiserver

import (
	"encoding/json"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiservertest"
	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiv1"
	"github.com/antrea-proxy/antrea-proxy/pkg/model"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy"
)

// TestServiceMapDualStackRows: each family's row carries that family's addresses; hostname-only
// ingresses appear on both rows; the decisions are the model's.
func TestServiceMapDualStackRows(t *testing.T) {
	vip := v1.LoadBalancerIPModeVIP
	var ings []model.LBIngress
	for _, ing := range []v1.LoadBalancerIngress{{IP: "172.18.0.1", IPMode: &vip}, {IP: "fd00:18::1"}, {Hostname: "lb.example.com"}} {
		ings = append(ings, model.LBIngressFromAPI(true, ing, model.DualStack))
	}
	nn := types.NamespacedName{Namespace: "default", Name: "dual"}
	sp := model.ServicePort{
		Name:       model.ServicePortName{NamespacedName: nn, Port: "https", Protocol: model.TCP},
		ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.5"), netip.MustParseAddr("fd00:96::5")}, Port: 443, Protocol: model.TCP,
		ExternalIPs:         []netip.Addr{netip.MustParseAddr("192.168.9.9"), netip.MustParseAddr("2001:db8::9")},
		LoadBalancerIngress: ings, NodePort: 30443,
	}
	eps := []model.Endpoint{
		{IP: netip.MustParseAddr("10.244.0.5"), Port: 8443, Ready: true, Serving: true, Local: true},
		{IP: netip.MustParseAddr("fd00:244::5"), Port: 8443, Ready: true, Serving: true},
	}
	src := apiservertest.NewFakeSource()
	src.Add(nn, apiservertest.SyncTime, apiservertest.PortSpec{Port: sp, GroupID: 7, Endpoints: eps},
		apiservertest.PortSpec{Port: sp, GroupID: 8, IPv6: true, Endpoints: eps})

	m := BuildServiceMap(src, ServiceFilter{Namespace: "default"})
	type row struct {
		Family, Cookie        string
		ClusterIPs, Externals []string
		Ingress               []apiv1.LBIngress
		Flows, EPFlows, Group int
	}
	var got []row
	for _, it := range m.Items {
		got = append(got, row{it.IPFamily, it.Cookie, it.ClusterIPs, it.ExternalIPs, it.LoadBalancerIngress, it.Flows, it.EndpointFlows, int(it.GroupID)})
	}
	hostname := apiv1.LBIngress{Hostname: "lb.example.com", Reason: "skipped: hostname-only ingress"}
	want := []row{
		{"IPv4", "0x20000000007", []string{"10.96.0.5"}, []string{"192.168.9.9"}, []apiv1.LBIngress{
			{IP: "172.18.0.1", IPMode: "VIP", Programmed: true, Reason: "programmed (ipMode VIP)"}, hostname}, 4, 0, 7},
		{"IPv6", "0x20000000008", []string{"fd00:96::5"}, []string{"2001:db8::9"}, []apiv1.LBIngress{
			{IP: "fd00:18::1", Programmed: true, Reason: "programmed (ipMode unset, treated as VIP)"}, hostname}, 4, 0, 8},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
	if n := len(BuildServiceMap(src, ServiceFilter{Namespace: "other"}).Items); n != 0 {
		t.Errorf("namespace filter: got %d rows", n)
	}
	if n := len(BuildServiceMap(src, ServiceFilter{AllNamespaces: true, Name: "nope"}).Items); n != 0 {
		t.Errorf("name filter: got %d rows", n)
	}
}

func TestProblemItem(t *testing.T) {
	since := time.Date(2026, 3, 1, 10, 0, 0, 0, time.FixedZone("CET", 3600))
	got := problemItem(apiv1.ProblemOVSRejected, "OFPBAC_BAD_OUT_GROUP", since, 3, since.Add(8*time.Second))
	require.Equal(t, &apiv1.Problem{Reason: "OVSRejected", Message: "OFPBAC_BAD_OUT_GROUP",
		Since: "2026-03-01T09:00:00Z", Retries: 3, NextRetry: "2026-03-01T09:00:08Z"}, got)
	got = problemItem(apiv1.ProblemFlowConflict, "tcp,nw_dst=10.96.0.10,tp_dst=80 is programmed for default/web", since, 0, time.Time{})
	require.Empty(t, got.NextRetry, "no retry scheduled")
	// Without a Problem from the proxier the field is null, never absent.
	b, err := json.Marshal(apiv1.ServicePort{})
	require.NoError(t, err)
	require.Contains(t, string(b), `"problem":null`)
}

// TestServiceMapProblems: a Service's problem reaches every row of it, and a Service quarantined
// before anything of it was installed still has a row that carries its problem.
func TestServiceMapProblems(t *testing.T) {
	nn := types.NamespacedName{Namespace: "default", Name: "web"}
	sp := model.ServicePort{Name: model.ServicePortName{NamespacedName: nn, Port: "http", Protocol: model.TCP},
		ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.10")}, Port: 80, Protocol: model.TCP}
	src := apiservertest.NewFakeSource()
	src.Add(nn, apiservertest.SyncTime, apiservertest.PortSpec{Port: sp, GroupID: 3})
	since := apiservertest.SyncTime.Add(-time.Minute)
	src.SetProblem(nn, &proxy.ServiceProblem{Reason: proxy.ProblemFlowConflict, Message: "tcp,nw_dst=10.96.0.10,tp_dst=80 is programmed for default/old", Since: since})
	bad := types.NamespacedName{Namespace: "default", Name: "bad"}
	src.SetProblem(bad, &proxy.ServiceProblem{Reason: proxy.ProblemOVSRejected, Message: "OFPBAC_BAD_OUT_GROUP", Since: since, Retries: 2, NextRetry: since.Add(4 * time.Second)})

	m := BuildServiceMap(src, ServiceFilter{Namespace: "default"})
	require.Len(t, m.Items, 2)
	got := map[string]*apiv1.Problem{}
	for _, it := range m.Items {
		got[it.Name] = it.Problem
	}
	require.NotNil(t, got["web"], "the installed Service's row lost its problem")
	require.Equal(t, apiv1.ProblemFlowConflict, got["web"].Reason)
	require.NotNil(t, got["bad"], "a Service quarantined before it was installed has no row")
	require.Equal(t, apiv1.ProblemOVSRejected, got["bad"].Reason)
	require.Equal(t, 2, got["bad"].Retries)
	require.Equal(t, since.Add(4*time.Second).UTC().Format(time.RFC3339), got["bad"].NextRetry)
	b, err := json.Marshal(m)
	require.NoError(t, err)
	require.Contains(t, string(b), `"problem":{"reason":"OVSRejected"`)
}
