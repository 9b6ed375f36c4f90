package model

import (
	"net/netip"
	"sort"

	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// EndpointsForServicePort merges the endpoints of one Service port across the Service's
// EndpointSlices.
//
// Only slices in port's namespace whose kubernetes.io/service-name label equals port's Service
// name are used. Slices of addressType FQDN or of a family not in served are skipped. A slice
// port matches when its name and protocol (nil protocol means TCP) equal port's; a matching slice
// port without a number (or with one outside 1..65535) is skipped. Each endpoint contributes its
// first address only. Conditions default as the EndpointSlice API documents: ready nil means
// true, serving nil means the ready value, terminating nil means false.
//
// An endpoint (IP and port) present in several slices is returned once; the copy that is ready
// wins, then serving, then not terminating, then the one in the slice with the smallest name, so
// the result does not depend on slice order. The result is sorted by IP then port. It never
// panics on malformed input; nil slices and endpoints are ignored.
func EndpointsForServicePort(slices []*discovery.EndpointSlice, port ServicePortName, nodeName string, served Families) []Endpoint {
	byAddr := map[netip.AddrPort]Endpoint{}
	for _, slice := range sortedSlices(slices) {
		if !sliceBelongsTo(slice, port.NamespacedName) || !servesAddressType(served, slice.AddressType) {
			continue
		}
		num, ok := slicePortNumber(slice, port)
		if !ok {
			continue
		}
		for i := range slice.Endpoints {
			ep, ok := convertEndpoint(&slice.Endpoints[i], slice.AddressType, num, nodeName)
			if !ok {
				continue
			}
			key := netip.AddrPortFrom(ep.IP, ep.Port)
			if old, seen := byAddr[key]; !seen || better(ep, old) {
				byAddr[key] = ep
			}
		}
	}
	if len(byAddr) == 0 {
		return nil
	}
	out := make([]Endpoint, 0, len(byAddr))
	for _, ep := range byAddr {
		out = append(out, ep)
	}
	SortEndpoints(out)
	return out
}

// EndpointsForService merges the endpoints of every port of a Service, keyed by ServicePortName,
// with the same rules as EndpointsForServicePort. Ports with no usable endpoint are absent.
func EndpointsForService(slices []*discovery.EndpointSlice, svc types.NamespacedName, nodeName string, served Families) map[ServicePortName][]Endpoint {
	ports := map[ServicePortName]struct{}{}
	for _, slice := range slices {
		if !sliceBelongsTo(slice, svc) {
			continue
		}
		for _, p := range slice.Ports {
			name := ""
			if p.Name != nil {
				name = *p.Name
			}
			proto := TCP
			if p.Protocol != nil {
				var ok bool
				if proto, ok = protocolOf(*p.Protocol); !ok {
					continue
				}
			}
			ports[ServicePortName{NamespacedName: svc, Port: name, Protocol: proto}] = struct{}{}
		}
	}
	out := map[ServicePortName][]Endpoint{}
	for spn := range ports {
		if eps := EndpointsForServicePort(slices, spn, nodeName, served); len(eps) > 0 {
			out[spn] = eps
		}
	}
	return out
}

// SortEndpoints sorts endpoints canonically: by IP, then port.
func SortEndpoints(eps []Endpoint) {
	sort.Slice(eps, func(i, j int) bool {
		if c := eps[i].IP.Compare(eps[j].IP); c != 0 {
			return c < 0
		}
		return eps[i].Port < eps[j].Port
	})
}

// sortedSlices drops nil slices and orders the rest by name, so merging is deterministic.
func sortedSlices(in []*discovery.EndpointSlice) []*discovery.EndpointSlice {
	out := make([]*discovery.EndpointSlice, 0, len(in))
	for _, s := range in {
		if s != nil {
			out = append(out, s)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func sliceBelongsTo(slice *discovery.EndpointSlice, svc types.NamespacedName) bool {
	return slice != nil && slice.Namespace == svc.Namespace &&
		slice.Labels[discovery.LabelServiceName] == svc.Name
}

func servesAddressType(served Families, t discovery.AddressType) bool {
	switch t {
	case discovery.AddressTypeIPv4:
		return served.IPv4
	case discovery.AddressTypeIPv6:
		return served.IPv6
	}
	return false // FQDN and anything unknown
}

// slicePortNumber finds the slice port matching port's name and protocol.
func slicePortNumber(slice *discovery.EndpointSlice, port ServicePortName) (uint16, bool) {
	for _, p := range slice.Ports {
		name := ""
		if p.Name != nil {
			name = *p.Name
		}
		proto := TCP
		if p.Protocol != nil {
			proto = Protocol(*p.Protocol)
		}
		if name != port.Port || proto != port.Protocol {
			continue
		}
		if p.Port == nil {
			return 0, false
		}
		n := portNumber(*p.Port)
		return n, n != 0
	}
	return 0, false
}

func convertEndpoint(e *discovery.Endpoint, addrType discovery.AddressType, port uint16, nodeName string) (Endpoint, bool) {
	if len(e.Addresses) == 0 {
		return Endpoint{}, false
	}
	ip, ok := parseAddr(e.Addresses[0])
	if !ok || ip.Is4() != (addrType == discovery.AddressTypeIPv4) {
		return Endpoint{}, false
	}
	ready := e.Conditions.Ready == nil || *e.Conditions.Ready
	serving := ready
	if e.Conditions.Serving != nil {
		serving = *e.Conditions.Serving
	}
	terminating := e.Conditions.Terminating != nil && *e.Conditions.Terminating
	ep := Endpoint{
		IP:          ip,
		Port:        port,
		Ready:       ready,
		Serving:     serving,
		Terminating: terminating,
	}
	if e.NodeName != nil {
		ep.NodeName = *e.NodeName
	}
	ep.Local = nodeName != "" && ep.NodeName == nodeName
	if e.Zone != nil {
		ep.Zone = *e.Zone
	}
	if e.Hints != nil {
		for _, z := range e.Hints.ForZones {
			ep.ZoneHints = append(ep.ZoneHints, z.Name)
		}
		for _, n := range e.Hints.ForNodes {
			ep.NodeHints = append(ep.NodeHints, n.Name)
		}
	}
	return ep, true
}

// better reports whether a should replace b as the merged copy of a duplicated endpoint. Slices
// are visited in name order and ties keep the earlier copy.
func better(a, b Endpoint) bool {
	if a.Ready != b.Ready {
		return a.Ready
	}
	if a.Serving != b.Serving {
		return a.Serving
	}
	if a.Terminating != b.Terminating {
		return !a.Terminating
	}
	return false
}
