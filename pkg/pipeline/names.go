package pipeline

import (
	"math/bits"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// RegFields are the named fields of the registers the pipeline uses (see Registers), for
// dumps, goldens and antctl. The IPv6 endpoint (xxreg3) has no field: it shows as reg12..reg15.
func RegFields() []of.RegField {
	return []of.RegField{
		{Name: "PacketSource", Reg: RegSource, Start: 0, End: 3,
			Values: map[uint32]string{SourceGateway: "Gateway", SourcePod: "Pod", SourceUplink: "Uplink"}},
		bitField("NodePortAddress", RegSource, BitNodePortAddr),
		bitField("ExternalService", RegSource, BitExternalService),
		bitField("FromHost", RegSource, BitFromHost),
		bitField("ServiceTuple", RegSource, BitServiceTuple),
		{Name: "EndpointIPv4", Reg: RegEndpointIPv4, Start: 0, End: 31, IPv4: true},
		{Name: "EndpointPort", Reg: RegEndpointPort, Start: 0, End: 15},
		bitField("EndpointSet", RegEndpointPort, BitEndpointSet),
		bitField("LearnOK", RegEndpointPort, BitLearnOK),
		bitField("LearnCounted", RegEndpointPort, BitLearnCounted),
		{Name: "RejectShard", Reg: RegRejectShard, Start: 0, End: 31},
		{Name: "ServiceGroup", Reg: RegServiceGroup, Start: 0, End: 31},
	}
}

func bitField(name string, reg uint8, bit uint32) of.RegField {
	n := uint8(bits.TrailingZeros32(bit))
	return of.RegField{Name: name, Reg: reg, Start: n, End: n}
}

// Names are the display names of the pipeline's tables (TableNames) and registers (RegFields),
// with which dumps, goldens and antctl render flows.
func Names() *of.Names {
	n, err := of.NewNames(TableNames, RegFields())
	if err != nil {
		panic(err) // the names are constants of this package; TestNames checks them
	}
	return n
}
