package observe

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
)

func lep(ip string, local, ready, serving, terminating bool) model.Endpoint {
	return model.Endpoint{IP: netip.MustParseAddr(ip), Port: 80, Local: local, Ready: ready, Serving: serving, Terminating: terminating}
}

func TestSummarize(t *testing.T) {
	etpLocal := model.ServicePort{ExternalPolicyLocal: true, HealthCheckNodePort: 30100}
	itpLocal := model.ServicePort{InternalPolicyLocal: true}
	tests := []struct {
		name  string
		ports []PortEndpoints
		want  *ServiceSummary
	}{
		{name: "not installed", want: nil},
		{
			name: "cluster policy, endpoints of the other family ignored",
			ports: []PortEndpoints{{Port: model.ServicePort{}, Endpoints: []model.Endpoint{
				lep("10.0.0.1", false, true, true, false), lep("fd00::1", true, true, true, false)}}},
			want: &ServiceSummary{Ports: 1, Endpoints: 1},
		},
		{
			name: "eTP=Local with a ready local endpoint",
			ports: []PortEndpoints{{Port: etpLocal, Endpoints: []model.Endpoint{
				lep("10.0.0.1", true, true, true, false), lep("10.0.0.2", false, true, true, false)}}},
			want: &ServiceSummary{Ports: 1, Endpoints: 2, HealthCheckNodePort: 30100, LocalReady: 1},
		},
		{
			name: "eTP=Local, local endpoint not ready: no local endpoint",
			ports: []PortEndpoints{{Port: etpLocal, Endpoints: []model.Endpoint{
				lep("10.0.0.1", true, false, false, false), lep("10.0.0.2", false, true, true, false)}}},
			want: &ServiceSummary{Ports: 1, Endpoints: 2, NoLocalExternal: 1, HealthCheckNodePort: 30100},
		},
		{
			name: "iTP=Local falls back to a serving terminating local endpoint (not counted as ready)",
			ports: []PortEndpoints{{Port: itpLocal, Endpoints: []model.Endpoint{
				lep("10.0.0.1", true, false, true, true)}}},
			want: &ServiceSummary{Ports: 1, Endpoints: 1},
		},
		{
			name:  "iTP=Local without endpoints",
			ports: []PortEndpoints{{Port: itpLocal}, {Port: itpLocal, IPv6: true}},
			want:  &ServiceSummary{Ports: 2, NoLocalInternal: 2},
		},
		{
			name: "local ready counted once per address across ports; dual-stack pod counts once",
			ports: []PortEndpoints{
				{Port: etpLocal, Endpoints: []model.Endpoint{lep("10.0.0.1", true, true, true, false), lep("10.0.0.3", true, true, true, false)}},
				{Port: etpLocal, Endpoints: []model.Endpoint{lep("10.0.0.1", true, true, true, false)}},
				{Port: etpLocal, IPv6: true, Endpoints: []model.Endpoint{lep("fd00::1", true, true, true, false)}},
			},
			want: &ServiceSummary{Ports: 3, Endpoints: 4, HealthCheckNodePort: 30100, LocalReady: 2},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Summarize(tc.ports)); diff != "" {
				t.Errorf("Summarize (-want +got):\n%s", diff)
			}
		})
	}
}

type countingObserver struct{ queued, nodes, syncs int }

func (c *countingObserver) QueuedUpdate()        { c.queued++ }
func (c *countingObserver) NodeUpdated(*v1.Node) { c.nodes++ }
func (c *countingObserver) SyncDone(SyncResult)  { c.syncs++ }

func TestObserversFanOut(t *testing.T) {
	a, b := &countingObserver{}, &countingObserver{}
	o := Observers{a, b}
	o.QueuedUpdate()
	o.NodeUpdated(&v1.Node{})
	o.SyncDone(SyncResult{})
	o.SyncDone(SyncResult{})
	want := countingObserver{queued: 1, nodes: 1, syncs: 2}
	for _, got := range []*countingObserver{a, b} {
		if diff := cmp.Diff(want, *got, cmp.AllowUnexported(countingObserver{})); diff != "" {
			t.Errorf("observer calls (-want +got):\n%s", diff)
		}
	}
}
