// Package apiservertest provides a fake of the proxier as the agent API sees it, and a fixture of
// Services whose LB ingresses cover every KEP-1860 Option 1 decision and reason. The fixture's
// decisions come from model.LBIngressFromAPI and its flows from pipeline.ServicePort, the
// functions the proxier uses, so what tests print is what an agent would program.
package apiservertest

import (
	"net/netip"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy"
)

// FakeSource is an in-memory ServiceSource.
type FakeSource struct {
	mu       sync.Mutex
	services []proxy.ServiceStatus
	flows    map[types.NamespacedName][]of.Flow
	groups   map[types.NamespacedName][]of.Group
	LastSync time.Time
	SyncErr  error
	Syncs    int
	FlowRnd  uint16
}

// NewFakeSource returns an empty source.
func NewFakeSource() *FakeSource {
	return &FakeSource{flows: map[types.NamespacedName][]of.Flow{}, groups: map[types.NamespacedName][]of.Group{}}
}

// Services implements apiserver.ServiceSource.
func (f *FakeSource) Services() []proxy.ServiceStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]proxy.ServiceStatus(nil), f.services...)
}

// ServiceFlows implements apiserver.ServiceSource.
func (f *FakeSource) ServiceFlows(nn types.NamespacedName) ([]of.Flow, []of.Group) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]of.Flow(nil), f.flows[nn]...), append([]of.Group(nil), f.groups[nn]...)
}

// SyncState implements apiserver.ServiceSource.
func (f *FakeSource) SyncState() (time.Time, int, error) { return f.LastSync, f.Syncs, f.SyncErr }

// Round implements apiserver.ServiceSource.
func (f *FakeSource) Round() uint16 { return f.FlowRnd }

// PortSpec is one Service port in one family to add to the fake.
type PortSpec struct {
	Port      model.ServicePort
	Endpoints []model.Endpoint
	IPv6      bool
	GroupID   uint32
}

// Add programs a Service the way the proxier would: flows and group from pipeline.ServicePort,
// status as proxy.Proxier.Services reports it.
func (f *FakeSource) Add(nn types.NamespacedName, lastSync time.Time, ports ...PortSpec) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := proxy.ServiceStatus{Name: nn, LastSync: lastSync}
	for _, p := range ports {
		out := pipeline.ServicePort(pipeline.NodeConfig{Round: f.FlowRnd, IPv4: true, IPv6: true},
			pipeline.ServicePortInput{Port: p.Port, Endpoints: p.Endpoints, IPv6: p.IPv6, GroupID: p.GroupID, LocalGroupID: p.GroupID + 100})
		ps := proxy.PortStatus{Port: p.Port, IPv6: p.IPv6, Flows: len(out.Flows) + len(out.EndpointFlows)}
		for _, ep := range p.Endpoints {
			if ep.IP.Is6() != p.IPv6 {
				continue
			}
			ps.Endpoints.Total++
			ps.Endpoints.Local += b2i(ep.Local)
			ps.Endpoints.Ready += b2i(ep.Ready)
			ps.Endpoints.Serving += b2i(ep.Serving)
			ps.Endpoints.Terminating += b2i(ep.Terminating)
		}
		for _, g := range out.Groups {
			if ps.GroupID == 0 {
				ps.GroupID, ps.Buckets = g.ID, len(g.Buckets)
			} else {
				ps.LocalGroupID = g.ID
			}
			f.groups[nn] = append(f.groups[nn], *g)
		}
		if len(out.Flows) > 0 {
			ps.Cookie = out.Flows[0].Cookie
		}
		f.flows[nn] = append(f.flows[nn], out.Flows...)
		f.flows[nn] = append(f.flows[nn], out.EndpointFlows...)
		st.Ports = append(st.Ports, ps)
	}
	f.services = append(f.services, st)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// SyncTime is the last sync time of every fixture Service.
var SyncTime = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func mode(m string) *v1.LoadBalancerIPMode {
	v := v1.LoadBalancerIPMode(m)
	return &v
}

func addrs(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, a := range s {
		out[i] = netip.MustParseAddr(a)
	}
	return out
}

func ep(ip string, port uint16, local, ready, serving, terminating bool) model.Endpoint {
	return model.Endpoint{IP: netip.MustParseAddr(ip), Port: port, Local: local, Ready: ready, Serving: serving, Terminating: terminating}
}

// AllDecisions returns a source with Services whose LB ingresses cover every Option 1 decision
// and reason: default/web (IPv4-only agent with proxyLoadBalancerIPs=true: VIP, unset, Proxy,
// hostname-only, unknown ipMode, IPv6 ingress), prod/api (proxyLoadBalancerIPs=false: a VIP
// skipped), and default/dual (a dual-stack ClusterIP Service, one row per family).
func AllDecisions() *FakeSource {
	f := NewFakeSource()
	f.FlowRnd, f.LastSync, f.Syncs = 1, SyncTime, 7
	v4only := model.Families{IPv4: true}
	ingress := func(proxyLB bool, served model.Families, ings ...v1.LoadBalancerIngress) []model.LBIngress {
		out := make([]model.LBIngress, len(ings))
		for i, ing := range ings {
			out[i] = model.LBIngressFromAPI(proxyLB, ing, served)
		}
		return out
	}
	name := func(ns, n, port string, proto model.Protocol) model.ServicePortName {
		return model.ServicePortName{NamespacedName: types.NamespacedName{Namespace: ns, Name: n}, Port: port, Protocol: proto}
	}

	web := model.ServicePort{
		Name: name("default", "web", "http", model.TCP), ClusterIPs: addrs("10.96.0.10"), Port: 80, Protocol: model.TCP, NodePort: 30080,
		LoadBalancerIngress: ingress(true, v4only,
			v1.LoadBalancerIngress{IP: "172.18.0.100", IPMode: mode("VIP")},
			v1.LoadBalancerIngress{IP: "172.18.0.101", IPMode: mode("Proxy")},
			v1.LoadBalancerIngress{IP: "172.18.0.102"},
			v1.LoadBalancerIngress{Hostname: "lb.example.com"},
			v1.LoadBalancerIngress{IP: "172.18.0.104", IPMode: mode("Tunnel")},
			v1.LoadBalancerIngress{IP: "fd00:18::100", IPMode: mode("VIP")}),
		ExternalPolicyLocal: true, StickyMaxAgeSeconds: 10800,
	}
	f.Add(types.NamespacedName{Namespace: "default", Name: "web"}, SyncTime, PortSpec{Port: web, GroupID: 1, Endpoints: []model.Endpoint{
		ep("10.244.1.11", 8080, true, true, true, false),
		ep("10.244.1.12", 8080, true, true, true, false),
		ep("10.244.2.13", 8080, false, false, true, true),
	}})

	apiGRPC := model.ServicePort{
		Name: name("prod", "api", "grpc", model.TCP), ClusterIPs: addrs("10.96.1.20"), Port: 9090, Protocol: model.TCP, NodePort: 31090,
		ExternalIPs:         addrs("192.168.50.10"),
		LoadBalancerIngress: ingress(false, v4only, v1.LoadBalancerIngress{IP: "172.18.0.200", IPMode: mode("VIP")}),
	}
	apiMetrics := apiGRPC
	apiMetrics.Name, apiMetrics.Port, apiMetrics.NodePort, apiMetrics.Protocol = name("prod", "api", "metrics", model.UDP), 9100, 31100, model.UDP
	f.Add(types.NamespacedName{Namespace: "prod", Name: "api"}, SyncTime.Add(-90*time.Second),
		PortSpec{Port: apiGRPC, GroupID: 2, Endpoints: []model.Endpoint{ep("10.244.2.21", 9090, false, true, true, false)}},
		PortSpec{Port: apiMetrics, GroupID: 3}) // no endpoint: traffic is dropped

	dual := model.ServicePort{
		Name: name("default", "dual", "", model.TCP), ClusterIPs: addrs("10.96.0.30", "fd00:96::30"), Port: 443, Protocol: model.TCP,
		InternalPolicyLocal: true,
	}
	eps := []model.Endpoint{ep("10.244.1.31", 8443, true, true, true, false), ep("fd00:244:1::31", 8443, true, true, true, false)}
	f.Add(types.NamespacedName{Namespace: "default", Name: "dual"}, SyncTime.Add(-3*time.Hour),
		PortSpec{Port: dual, GroupID: 4, Endpoints: eps}, PortSpec{Port: dual, GroupID: 5, IPv6: true, Endpoints: eps})
	return f
}

// AllReasons lists every Option 1 reason of package model.
var AllReasons = []model.Reason{
	model.ReasonProgrammedVIP, model.ReasonProgrammedUnset, model.ReasonSkippedProxy, model.ReasonSkippedDisabled,
	model.ReasonSkippedHostname, model.ReasonSkippedFamily, model.ReasonSkippedUnknownMode,
}

// SetProblem gives the Service nn a problem, adding it without ports when it is not there yet
// (a Service quarantined before anything of it was installed).
func (f *FakeSource) SetProblem(nn types.NamespacedName, p *proxy.ServiceProblem) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.services {
		if f.services[i].Name == nn {
			f.services[i].Problem = p
			return
		}
	}
	f.services = append(f.services, proxy.ServiceStatus{Name: nn, Problem: p})
}
