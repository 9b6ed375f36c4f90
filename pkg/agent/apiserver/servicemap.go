package apiserver

import (
	"fmt"
	"net/netip"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiv1"
	"github.com/antrea-proxy/antrea-proxy/pkg/model"
	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy"
)

// ServiceSource is what the API reads from the proxier; *proxy.Proxier implements it.
type ServiceSource interface {
	Services() []proxy.ServiceStatus
	ServiceFlows(nn types.NamespacedName) ([]of.Flow, []of.Group)
	SyncState() (last time.Time, syncs int, err error)
	Round() uint16
}

// ServiceFilter selects Services of the servicemap: one namespace (or all) and optionally one
// name.
type ServiceFilter struct {
	AllNamespaces bool
	Namespace     string
	Name          string
}

func (f ServiceFilter) matches(nn types.NamespacedName) bool {
	if !f.AllNamespaces && nn.Namespace != f.Namespace {
		return false
	}
	return f.Name == "" || nn.Name == f.Name
}

// BuildServiceMap converts what src programmed into the servicemap schema, one item per Service
// port and family, sorted by namespace, name, port name, protocol and family. The LB ingress
// decisions are copied from the model (KEP-1860 Option 1, as the flows used them), never
// recomputed here.
func BuildServiceMap(src ServiceSource, f ServiceFilter) apiv1.ServiceMap {
	out := apiv1.ServiceMap{Kind: "ServiceMap", APIVersion: apiv1.APIVersion, Items: []apiv1.ServicePort{}}
	for _, svc := range src.Services() {
		if !f.matches(svc.Name) {
			continue
		}
		own := ownFlowCounts(src, svc)
		// Families that have a row, per port, to place addresses of other families.
		fams := map[model.ServicePortName]map[bool]bool{}
		for _, ps := range svc.Ports {
			if fams[ps.Port.Name] == nil {
				fams[ps.Port.Name] = map[bool]bool{}
			}
			fams[ps.Port.Name][ps.IPv6] = true
		}
		for _, ps := range svc.Ports {
			out.Items = append(out.Items, servicePortItem(svc, ps, fams[ps.Port.Name], own[ps.Cookie&pipeline.ServiceCookieMask]))
		}
		if len(svc.Ports) == 0 && svc.Problem != nil {
			// Quarantined before anything of it was installed: one row carries the problem.
			out.Items = append(out.Items, problemOnlyItem(svc))
		}
	}
	sort.SliceStable(out.Items, func(i, j int) bool {
		a, b := out.Items[i], out.Items[j]
		switch {
		case a.Namespace != b.Namespace:
			return a.Namespace < b.Namespace
		case a.Name != b.Name:
			return a.Name < b.Name
		case a.PortName != b.PortName:
			return a.PortName < b.PortName
		case a.Protocol != b.Protocol:
			return a.Protocol < b.Protocol
		}
		return a.IPFamily < b.IPFamily
	})
	return out
}

// ownFlowCounts counts a Service's flows per port cookie (service category and object; any
// round). Endpoint DNAT flows have their own category and are not counted here.
func ownFlowCounts(src ServiceSource, svc proxy.ServiceStatus) map[uint64]int {
	flows, _ := src.ServiceFlows(svc.Name)
	counts := map[uint64]int{}
	for _, fl := range flows {
		if pipeline.CookieCategory(fl.Cookie) == pipeline.CategoryService {
			counts[fl.Cookie&pipeline.ServiceCookieMask]++
		}
	}
	return counts
}

func servicePortItem(svc proxy.ServiceStatus, ps proxy.PortStatus, fams map[bool]bool, ownFlows int) apiv1.ServicePort {
	sp := ps.Port
	// An address belongs on this row when it is of the row's family, or when no row of this port
	// has its family (so that nothing the Service asks for disappears from the map).
	onRow := func(a netip.Addr) bool {
		if !a.IsValid() {
			return true
		}
		v6 := a.Is6() && !a.Is4In6()
		return v6 == ps.IPv6 || !fams[v6]
	}
	item := apiv1.ServicePort{
		Namespace:             svc.Name.Namespace,
		Name:                  svc.Name.Name,
		PortName:              sp.Name.Port,
		Port:                  sp.Port,
		Protocol:              string(sp.Protocol),
		IPFamily:              "IPv4",
		ClusterIPs:            []string{},
		NodePort:              sp.NodePort,
		ExternalIPs:           []string{},
		LoadBalancerIngress:   []apiv1.LBIngress{},
		ExternalTrafficPolicy: policy(sp.ExternalPolicyLocal),
		InternalTrafficPolicy: policy(sp.InternalPolicyLocal),
		SessionAffinity:       apiv1.SessionAffinity{Type: "None"},
		Endpoints: apiv1.EndpointCounts{
			Total: ps.Endpoints.Total, Local: ps.Endpoints.Local, Ready: ps.Endpoints.Ready,
			Serving: ps.Endpoints.Serving, Terminating: ps.Endpoints.Terminating,
		},
		GroupID:       ps.GroupID,
		Buckets:       ps.Buckets,
		Flows:         ownFlows,
		EndpointFlows: max(ps.Flows-ownFlows, 0),
		Cookie:        fmt.Sprintf("%#x", ps.Cookie),
		CookieMask:    fmt.Sprintf("%#x", pipeline.ServiceCookieMask),
		LastSync:      svc.LastSync.UTC().Format(time.RFC3339),
	}
	if p := svc.Problem; p != nil {
		item.Problem = problemItem(p.Reason, p.Message, p.Since, p.Retries, p.NextRetry)
	}
	if ps.IPv6 {
		item.IPFamily = "IPv6"
	}
	if ps.Cookie == 0 {
		item.Cookie = "0x0"
	}
	for _, ip := range sp.ClusterIPs {
		if (ip.Is6() && !ip.Is4In6()) == ps.IPv6 {
			item.ClusterIPs = append(item.ClusterIPs, ip.String())
		}
	}
	for _, ip := range sp.ExternalIPs {
		if onRow(ip) {
			item.ExternalIPs = append(item.ExternalIPs, ip.String())
		}
	}
	for _, ing := range sp.LoadBalancerIngress {
		if !onRow(ing.IP) {
			continue
		}
		lb := apiv1.LBIngress{Hostname: ing.Hostname, IPMode: string(ing.IPMode),
			Programmed: ing.Decision.Program, Reason: string(ing.Decision.Reason)}
		if ing.IP.IsValid() {
			lb.IP = ing.IP.String()
		}
		item.LoadBalancerIngress = append(item.LoadBalancerIngress, lb)
	}
	if sp.StickyMaxAgeSeconds > 0 {
		item.SessionAffinity = apiv1.SessionAffinity{Type: "ClientIP", TimeoutSeconds: sp.StickyMaxAgeSeconds}
	}
	return item
}

// problemItem converts a Service's problem (proxy.ServiceProblem's fields) to the schema; a zero
// nextRetry means no retry is scheduled.
func problemItem(reason, message string, since time.Time, retries int, nextRetry time.Time) *apiv1.Problem {
	p := &apiv1.Problem{Reason: reason, Message: message, Since: since.UTC().Format(time.RFC3339), Retries: retries}
	if !nextRetry.IsZero() {
		p.NextRetry = nextRetry.UTC().Format(time.RFC3339)
	}
	return p
}

func policy(local bool) string {
	if local {
		return "Local"
	}
	return "Cluster"
}

// BuildOVSFlows renders the flows and groups of the selected Services (all when nn is nil),
// sorted by Service, then flows by table, descending priority and text, groups by ID; with
// display's table and register names (numbers when display is nil).
func BuildOVSFlows(src ServiceSource, nn *types.NamespacedName, display *of.Names) apiv1.OVSFlows {
	var names []types.NamespacedName
	if nn != nil {
		names = []types.NamespacedName{*nn}
	} else {
		for _, svc := range src.Services() {
			names = append(names, svc.Name)
		}
		sort.Slice(names, func(i, j int) bool { return names[i].String() < names[j].String() })
	}
	out := apiv1.OVSFlows{Kind: "OVSFlows", APIVersion: apiv1.APIVersion, Items: []apiv1.ServiceFlows{}}
	for _, n := range names {
		flows, groups := src.ServiceFlows(n)
		sort.SliceStable(flows, func(i, j int) bool {
			a, b := &flows[i], &flows[j]
			if a.Table != b.Table {
				return a.Table < b.Table
			}
			if a.Priority != b.Priority {
				return a.Priority > b.Priority
			}
			return of.FormatFlow(a) < of.FormatFlow(b)
		})
		sort.Slice(groups, func(i, j int) bool { return groups[i].ID < groups[j].ID })
		item := apiv1.ServiceFlows{Namespace: n.Namespace, Name: n.Name, Flows: []string{}, Groups: []string{}}
		for i := range flows {
			item.Flows = append(item.Flows, of.FormatFlowNamed(&flows[i], display))
		}
		for i := range groups {
			item.Groups = append(item.Groups, of.FormatGroupNamed(&groups[i], display))
		}
		out.Items = append(out.Items, item)
	}
	return out
}

// problemOnlyItem is the row of a Service that has a problem but no installed port.
func problemOnlyItem(svc proxy.ServiceStatus) apiv1.ServicePort {
	p := svc.Problem
	return apiv1.ServicePort{
		Namespace: svc.Name.Namespace, Name: svc.Name.Name, IPFamily: "IPv4",
		ClusterIPs: []string{}, ExternalIPs: []string{}, LoadBalancerIngress: []apiv1.LBIngress{},
		ExternalTrafficPolicy: policy(false), InternalTrafficPolicy: policy(false),
		SessionAffinity: apiv1.SessionAffinity{Type: "None"}, Cookie: "0x0",
		CookieMask: fmt.Sprintf("%#x", pipeline.ServiceCookieMask),
		Problem:    problemItem(p.Reason, p.Message, p.Since, p.Retries, p.NextRetry),
	}
}
