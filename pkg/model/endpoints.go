package model

import (
	"cmp"
	"slices"
	"strings"

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
func EndpointsForServicePort(in []*EndpointSlice, port ServicePortName, nodeName string, served Families) []Endpoint {
	sorted := sortedSlices(in)
	n := 0
	for _, slice := range sorted {
		n += len(slice.Endpoints)
	}
	// Every usable endpoint in visit order (slices by name), then a stable sort by IP and port
	// puts the copies of one endpoint next to each other, still in visit order: no map.
	out := make([]Endpoint, 0, n)
	for _, slice := range sorted {
		if !sliceBelongsTo(slice, port.NamespacedName) || !servesAddressType(served, slice.AddressType) {
			continue
		}
		num, ok := slicePortNumber(slice, port)
		if !ok {
			continue
		}
		for i := range slice.Endpoints {
			if ep, ok := convertEndpoint(&slice.Endpoints[i], slice.HintsOf(i), slice.AddressType, num, nodeName); ok {
				out = append(out, ep)
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	if !slices.IsSortedFunc(out, compareEndpoints) {
		slices.SortStableFunc(out, compareEndpoints)
	}
	return mergeDuplicates(out)
}

// mergeDuplicates keeps, of each run of copies of one endpoint in sorted eps, the first copy
// no later one is better than (better), in place.
func mergeDuplicates(eps []Endpoint) []Endpoint {
	w := 0
	for r := 0; r < len(eps); r++ {
		if w > 0 && compareEndpoints(eps[w-1], eps[r]) == 0 {
			if better(eps[r], eps[w-1]) {
				eps[w-1] = eps[r]
			}
			continue
		}
		eps[w] = eps[r]
		w++
	}
	clear(eps[w:])
	return eps[:w]
}

// EndpointsForService merges the endpoints of every port of a Service, keyed by ServicePortName,
// with the same rules as EndpointsForServicePort. Ports with no usable endpoint are absent.
func EndpointsForService(in []*EndpointSlice, svc types.NamespacedName, nodeName string, served Families) map[ServicePortName][]Endpoint {
	var ports []ServicePortName // a Service has few ports: a list, not a map
	for _, slice := range in {
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
			if spn := (ServicePortName{NamespacedName: svc, Port: name, Protocol: proto}); !slices.Contains(ports, spn) {
				ports = append(ports, spn)
			}
		}
	}
	out := make(map[ServicePortName][]Endpoint, len(ports))
	for _, spn := range ports {
		if eps := EndpointsForServicePort(in, spn, nodeName, served); len(eps) > 0 {
			out[spn] = eps
		}
	}
	return out
}

// compareEndpoints orders endpoints by IP, then port.
func compareEndpoints(a, b Endpoint) int {
	if c := a.IP.Compare(b.IP); c != 0 {
		return c
	}
	return cmp.Compare(a.Port, b.Port)
}

// sortedSlices drops nil slices and orders the rest by name, so merging is deterministic.
func sortedSlices(in []*EndpointSlice) []*EndpointSlice {
	if len(in) == 1 && in[0] != nil {
		return in // the common case: nothing to drop or order
	}
	out := make([]*EndpointSlice, 0, len(in))
	for _, s := range in {
		if s != nil {
			out = append(out, s)
		}
	}
	slices.SortStableFunc(out, func(a, b *EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func sliceBelongsTo(slice *EndpointSlice, svc types.NamespacedName) bool {
	return slice != nil && slice.Namespace == svc.Namespace && slice.Service == svc.Name
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
func slicePortNumber(slice *EndpointSlice, port ServicePortName) (uint16, bool) {
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

func convertEndpoint(e *SliceEndpoint, hints *discovery.EndpointHints, addrType discovery.AddressType, port uint16, nodeName string) (Endpoint, bool) {
	if !e.Addr.IsValid() || e.Addr.Is4() != (addrType == discovery.AddressTypeIPv4) {
		return Endpoint{}, false
	}
	ep := Endpoint{
		IP:          e.Addr,
		Port:        port,
		NodeName:    e.Node(),
		Zone:        e.Zone(),
		Local:       nodeName != "" && e.Node() == nodeName,
		Ready:       e.Ready,
		Serving:     e.Serving,
		Terminating: e.Terminating,
	}
	if hints != nil {
		for _, z := range hints.ForZones {
			ep.ZoneHints = append(ep.ZoneHints, z.Name)
		}
		for _, n := range hints.ForNodes {
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
