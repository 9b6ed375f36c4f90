package servicetrace

import (
	"net/netip"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiv1"
	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// candidates lists the endpoint of every bucket of group id, following buckets that go to
// second-level groups. A bucket DNATs (ct nat(dst=IP:PORT)) or, with session affinity, loads
// the endpoint into registers (reg3 or xxreg3, and reg4's port).
func candidates(groups map[uint32]*of.Group, id uint32) []apiv1.TraceEndpoint {
	out := []apiv1.TraceEndpoint{}
	seen := map[uint32]bool{}
	var walk func(id uint32)
	walk = func(id uint32) {
		g := groups[id]
		if g == nil || seen[id] {
			return
		}
		seen[id] = true
		for _, b := range g.Buckets {
			if sub, ok := subGroup(b.Actions); ok {
				walk(sub)
				continue
			}
			if ep, ok := bucketEndpoint(b.Actions); ok {
				out = append(out, apiv1.TraceEndpoint{Endpoint: ep.String(), Group: id, Bucket: b.ID, Weight: b.Weight})
			}
		}
	}
	walk(id)
	return out
}

func subGroup(actions []of.Action) (uint32, bool) {
	for _, a := range actions {
		if g, ok := a.(of.GroupAction); ok {
			return g.ID, true
		}
	}
	return 0, false
}

func bucketEndpoint(actions []of.Action) (netip.AddrPort, bool) {
	var v4 uint32
	var v6 [4]uint32
	var port uint16
	has4, has6 := false, 0
	for _, a := range actions {
		switch a := a.(type) {
		case of.CT:
			if a.NAT != nil && a.NAT.Kind == of.NATDst && a.NAT.Addr.IsValid() {
				return netip.AddrPortFrom(a.NAT.Addr, a.NAT.Port), true
			}
		case of.SetReg:
			switch {
			case a.Reg == pipeline.RegEndpointIPv4:
				v4, has4 = a.Value, true
			case a.Reg >= pipeline.RegEndpointIPv6First && a.Reg < pipeline.RegEndpointIPv6First+4:
				v6[a.Reg-pipeline.RegEndpointIPv6First] = a.Value
				has6++
			case a.Reg == pipeline.RegEndpointPort:
				port = uint16(a.Value & pipeline.EndpointPortMask)
			}
		}
	}
	switch {
	case has4:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte{byte(v4 >> 24), byte(v4 >> 16), byte(v4 >> 8), byte(v4)}), port), true
	case has6 == 4:
		var b [16]byte
		for i, w := range v6 {
			b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(w>>24), byte(w>>16), byte(w>>8), byte(w)
		}
		return netip.AddrPortFrom(netip.AddrFrom16(b), port), true
	}
	return netip.AddrPort{}, false
}
