package proxy

import (
	"net/netip"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/reconciler"
)

// serviceStatus is what was installed for one Service at its last sync: its ports, one per
// owner (ownerList). lastSync is shared by the Services a sync committed.
type serviceStatus struct {
	ports    []portStatus
	lastSync *time.Time
	// one holds ports when there is one (most Services: one port, one family), so that the
	// status is one heap object for the collector to mark instead of two.
	one [1]portStatus
}

// portStatus is a PortStatus as the proxier keeps it, one per installed Service port and
// family: its numbers in 32 bits (PortStatus converts) and its port in portDef.
type portStatus struct {
	def                   portDef
	cookie                uint64
	groupID, localGroupID uint32
	buckets, flows        uint32
	// endpoints are EndpointCounts' Total, Local, Ready, Serving and Terminating.
	endpoints [5]uint32
	ipv6      bool
}

// portDef keeps a model.ServicePort of a Service: most ports have only a name, protocol,
// ClusterIPs, port, NodePort and traffic policies, which it holds itself (the Service's name is
// its status's key); a port with any other field set, or a name that is not its Service's and
// protocol's, is kept whole in full. The port it gives back is the one it was made from, field
// for field (nil lists stay nil).
type portDef struct {
	full           *model.ServicePort
	name           string
	protocol       model.Protocol
	clusterIPs     []netip.Addr
	port, nodePort uint16
	// externalLocal and internalLocal are ExternalPolicyLocal and InternalPolicyLocal.
	externalLocal, internalLocal bool
}

// makePortDef keeps sp, a port of Service nn.
func makePortDef(nn types.NamespacedName, sp model.ServicePort) portDef {
	if sp.Name.NamespacedName != nn || sp.Name.Protocol != sp.Protocol || sp.ExternalIPs != nil ||
		sp.LoadBalancerIngress != nil || sp.SourceRanges != nil || sp.StickyMaxAgeSeconds != 0 ||
		sp.HealthCheckNodePort != 0 || sp.TrafficDistribution != "" {
		full := new(model.ServicePort)
		*full = sp
		return portDef{full: full}
	}
	return portDef{name: sp.Name.Port, protocol: sp.Protocol, clusterIPs: sp.ClusterIPs, port: sp.Port,
		nodePort: sp.NodePort, externalLocal: sp.ExternalPolicyLocal, internalLocal: sp.InternalPolicyLocal}
}

// servicePort returns the port of Service nn that d keeps.
func (d *portDef) servicePort(nn types.NamespacedName) model.ServicePort {
	if d.full != nil {
		return *d.full
	}
	return model.ServicePort{Name: d.portName(nn), ClusterIPs: d.clusterIPs, Port: d.port, Protocol: d.protocol,
		NodePort: d.nodePort, ExternalPolicyLocal: d.externalLocal, InternalPolicyLocal: d.internalLocal}
}

// portName returns the name of the port of Service nn that d keeps.
func (d *portDef) portName(nn types.NamespacedName) model.ServicePortName {
	if d.full != nil {
		return d.full.Name
	}
	return model.ServicePortName{NamespacedName: nn, Port: d.name, Protocol: d.protocol}
}

// PortStatus returns the PortStatus ps, a port of Service nn, keeps.
func (ps *portStatus) PortStatus(nn types.NamespacedName) PortStatus {
	e := ps.endpoints
	return PortStatus{Port: ps.def.servicePort(nn), IPv6: ps.ipv6, GroupID: ps.groupID, LocalGroupID: ps.localGroupID,
		Buckets: int(ps.buckets), Flows: int(ps.flows), Cookie: ps.cookie,
		Endpoints: EndpointCounts{Total: int(e[0]), Local: int(e[1]), Ready: int(e[2]), Serving: int(e[3]), Terminating: int(e[4])}}
}

// ownerList returns the owners of st, the status of Service nn: those of its ports in order
// (none for a nil st). A port's owner is named after the port and its family (ownerOf), so it
// is not kept.
func (st *serviceStatus) ownerList(nn types.NamespacedName) []owner {
	if st == nil {
		return nil
	}
	out := make([]owner, len(st.ports))
	for i := range st.ports {
		out[i] = ownerOf(st.ports[i].def.portName(nn), st.ports[i].ipv6)
	}
	return out
}

// PortStatus describes one Service port in one family as installed.
type PortStatus struct {
	Port    model.ServicePort
	IPv6    bool
	GroupID uint32 // the cluster group; 0 when the port has no endpoint (traffic dropped)
	// LocalGroupID is the local group (Local traffic policies); 0 when there is none.
	LocalGroupID uint32
	// Buckets is the number of endpoints in the group (those that receive new connections).
	Buckets   int
	Endpoints EndpointCounts
	Flows     int // flows owned (including shared endpoint flows)
	Cookie    uint64
}

// EndpointCounts counts a Service port's endpoints of one family.
type EndpointCounts struct {
	Total, Local, Ready, Serving, Terminating int
}

// ServiceStatus is the installed state of one Service.
//
// Its ports list only what the proxier programs: an ExternalIP that is refused
// (model.AddrPolicy) or whose (address, protocol, port) another Service owns (claims.go) is
// removed from Port.ExternalIPs; such an LB ingress stays listed with Decision.Program false and
// Reason model.ReasonSkippedRefused or "skipped: claimed by <ns/name>"; a NodePort another
// Service owns is 0. Problem names every address left out (AddressRefused, FlowConflict). The
// agent derives the host's capture of Service traffic (routes, NodePort rules, announced LB IPs)
// from these ports, so it never captures what OVS does not serve.
type ServiceStatus struct {
	Name     types.NamespacedName
	Ports    []PortStatus
	LastSync time.Time
	// Problem is why the Service is not (entirely) programmed as it asks; nil when it is.
	Problem *ServiceProblem
}

// ServiceProblem says why a Service is not programmed as it asks.
type ServiceProblem struct {
	// Reason is ProblemOVSRejected, ProblemFlowConflict or ProblemAddressRefused; Message the
	// details (OVS's error, the addresses the Service lacks and why, or which Service owns a
	// contested flow match).
	Reason, Message string
	// Since is when the problem appeared.
	Since time.Time
	// Retries and NextRetry describe a quarantine's retries (OVSRejected).
	Retries   int
	NextRetry time.Time
}

// makeStatus returns the status of Service nn committed at *now with want.
func (p *Proxier) makeStatus(nn types.NamespacedName, want []desired, now *time.Time) *serviceStatus {
	st := &serviceStatus{lastSync: now}
	if st.ports = st.one[:0]; len(want) > 1 {
		st.ports = make([]portStatus, 0, len(want))
	}
	flows := make([]int, len(want))
	p.bridgeState.Read(func(s *reconciler.State) {
		for i, d := range want {
			flows[i] = s.FlowCount(d.owner)
		}
	})
	for i, d := range want {
		ps := portStatus{def: makePortDef(nn, d.port), ipv6: d.ipv6, flows: uint32(flows[i])}
		for _, ep := range d.endpoints {
			if ep.IP.Is6() != d.ipv6 {
				continue
			}
			for k, set := range [...]bool{true, ep.Local, ep.Ready, ep.Serving, ep.Terminating} {
				if set {
					ps.endpoints[k]++
				}
			}
		}
		var buckets int
		ps.groupID, ps.localGroupID, buckets = groupsStatus(d)
		ps.buckets = uint32(buckets)
		if len(d.flows.Flows) > 0 {
			ps.cookie = d.flows.Flows[0].Cookie
		}
		st.ports = append(st.ports, ps)
	}
	return st
}

// portStatuses returns the PortStatus of each of st's ports, those of Service nn (nil for
// none).
func (st *serviceStatus) portStatuses(nn types.NamespacedName) []PortStatus {
	if len(st.ports) == 0 {
		return nil
	}
	out := make([]PortStatus, len(st.ports))
	for i := range st.ports {
		out[i] = st.ports[i].PortStatus(nn)
	}
	return out
}

// Services returns the installed state of every programmed Service, and of every Service
// with a problem (a quarantined Service that was never installed has no ports).
func (p *Proxier) Services() []ServiceStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]ServiceStatus, 0, len(p.svcs))
	for nn, r := range p.svcs {
		st := r.status
		if st == nil {
			continue
		}
		out = append(out, ServiceStatus{Name: nn, Ports: st.portStatuses(nn), LastSync: *st.lastSync,
			Problem: copyProblem(p.problems[nn])})
	}
	for nn, pr := range p.problems {
		if p.statusOf(nn) == nil {
			out = append(out, ServiceStatus{Name: nn, Problem: copyProblem(pr)})
		}
	}
	return out
}

func copyProblem(pr *ServiceProblem) *ServiceProblem {
	if pr == nil {
		return nil
	}
	c := *pr
	return &c
}

// samePorts reports whether two statuses of Service nn hold the same ports (definition and
// family, in order), whatever their endpoints, groups and flows.
func samePorts(nn types.NamespacedName, a, b []portStatus) bool {
	return slices.EqualFunc(a, b, func(x, y portStatus) bool {
		return x.ipv6 == y.ipv6 && x.def.servicePort(nn).Equal(y.def.servicePort(nn))
	})
}

// PortsGeneration returns a number that changes whenever a sync changes what Services reports of
// the Service ports themselves (a Service port added, removed or redefined: its addresses,
// NodePort, LB ingress decisions, policies) or what NodePortAddresses or ServiceCIDRs returns;
// endpoint changes leave it alone. What is derived from those alone (the node's routes and NodePort rules, the
// LB IPs it announces) needs recomputing only when it changed: walking every Service after
// every sync costs, at 30,000 Services, far more than the sync itself.
func (p *Proxier) PortsGeneration() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.portsGen
}

// NodePortAddresses returns the node addresses on which the installed flows serve NodePorts
// (model.NodePortAddresses of this Node, as of the last sync that committed the node-level
// flows); nil before the first sync. The host side DNATs NodePorts on exactly these.
func (p *Proxier) NodePortAddresses() []netip.Addr {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.nodePortAddrs)
}

// Round returns this run's flow round (Options.Round).
func (p *Proxier) Round() uint16 { return p.round }

// ServiceFlows returns the flows and groups installed for one Service: its ServiceLB flows, its
// NodePort, LB and ExternalIP flows, the endpoint DNAT flows it uses, and its groups.
func (p *Proxier) ServiceFlows(nn types.NamespacedName) ([]of.Flow, []of.Group) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var flows []of.Flow
	var groups []of.Group
	for _, o := range p.statusOf(nn).ownerList(nn) {
		p.bridgeState.Read(func(st *reconciler.State) {
			st.OwnerFlows(o, func(f *of.Flow) { flows = append(flows, *f) })
			for _, g := range st.OwnerGroups(o) {
				groups = append(groups, *g)
			}
		})
	}
	return flows, groups
}

// SyncState reports the last successful sync time and the last error (nil after a success).
func (p *Proxier) SyncState() (last time.Time, syncs int, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastSync, p.syncs, p.syncErr
}

// ServiceFlowsContain reports whether any installed Service flow or group renders with s (an
// endpoint's DNAT is in a group bucket, or, with session affinity, in a flow); for tests and
// debugging.
func (p *Proxier) ServiceFlowsContain(s string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	found := false
	p.bridgeState.Read(func(st *reconciler.State) {
		st.EachFlow(func(o reconciler.Owner, f *of.Flow) {
			found = found || isProxierOwner(o) && strings.Contains(of.FormatFlow(f), s)
		})
		st.EachGroup(func(o reconciler.Owner, g *of.Group) {
			found = found || isProxierOwner(o) && strings.Contains(of.FormatGroup(g), s)
		})
	})
	return found
}

// groupsStatus returns the cluster and local group IDs d installed (0 for none) and the
// cluster group's endpoints: its buckets, or those of its second-level groups when it is split.
func groupsStatus(d desired) (cluster, local uint32, buckets int) {
	var top, subs int
	for _, g := range d.flows.Groups {
		switch {
		case g.ID == d.clusterGID:
			cluster, top = g.ID, len(g.Buckets)
		case g.ID == d.localGID:
			local = g.ID
		case slices.Contains(d.subGIDs, g.ID):
			subs += len(g.Buckets)
		}
	}
	if subs > 0 {
		return cluster, local, subs
	}
	return cluster, local, top
}
