package proxy

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/model"
)

// serviceStatus is what was installed for one Service at its last sync.
type serviceStatus struct {
	ports    []PortStatus
	lastSync time.Time
}

// PortStatus describes one Service port in one family as installed.
type PortStatus struct {
	Port      model.ServicePort
	IPv6      bool
	GroupID   uint32 // 0 when the port has no endpoint (traffic dropped)
	Endpoints int    // endpoints in the group
	Flows     int    // flows owned (including shared endpoint flows)
	Cookie    uint64
}

// ServiceStatus is the installed state of one Service.
type ServiceStatus struct {
	Name     types.NamespacedName
	Ports    []PortStatus
	LastSync time.Time
}

func (p *Proxier) makeStatus(want []desired, now time.Time) *serviceStatus {
	st := &serviceStatus{lastSync: now}
	for _, d := range want {
		ps := PortStatus{Port: d.port, IPv6: d.ipv6, Flows: p.state.flowCount(d.owner)}
		if d.flows.Group != nil {
			ps.GroupID = d.flows.Group.ID
			ps.Endpoints = len(d.flows.Group.Buckets)
		}
		if len(d.flows.Flows) > 0 {
			ps.Cookie = d.flows.Flows[0].Cookie
		}
		st.ports = append(st.ports, ps)
	}
	return st
}

// Services returns the installed state of every programmed Service.
func (p *Proxier) Services() []ServiceStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]ServiceStatus, 0, len(p.status))
	for nn, st := range p.status {
		out = append(out, ServiceStatus{Name: nn, Ports: append([]PortStatus(nil), st.ports...), LastSync: st.lastSync})
	}
	return out
}

// Round returns this run's flow round (0 before start-up).
func (p *Proxier) Round() uint16 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.round
}
