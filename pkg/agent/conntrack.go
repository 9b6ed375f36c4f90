package agent

import (
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/ovsdb"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// closedTCPTimeout is how long (seconds) OVS's userspace conntrack keeps a TCP connection of the
// pipeline's zones after it closed or was reset: 120 s, as Linux conntrack keeps TIME_WAIT
// (nf_conntrack_tcp_timeout_time_wait). The userspace datapath's defaults (30 s once both sides
// closed, 45 s while the last FIN is not acknowledged) are shorter than the TIME_WAIT of the
// endpoint that closed first (60 s on Linux). A connection forgotten earlier no longer holds its
// reply tuple, so a new one that DNATs (or commits) to the same endpoint tuple keeps its source
// port instead of moving it; the endpoint, still in TIME_WAIT, answers its SYN with a challenge
// ACK, and the client's reset that would end the TIME_WAIT is invalid to OVS conntrack and
// dropped: the connection never opens (docs/design/ovs-pipeline.md, "Conntrack zones and
// marks").
const closedTCPTimeout = 120

// userspaceZoneTimeouts is the timeout policy of every zone the pipeline commits connections in,
// for the userspace (netdev) datapath. The kernel datapath needs none: Linux keeps closed
// connections for 120 s already.
func userspaceZoneTimeouts() ovsdb.ZoneTimeouts {
	return ovsdb.ZoneTimeouts{
		DatapathType: ovsdb.DatapathNetdev,
		Zones: []int{int(pipeline.ZoneServiceV4), int(pipeline.ZoneSNATV4),
			int(pipeline.ZoneServiceV6), int(pipeline.ZoneSNATV6)},
		Timeouts: map[string]int{"tcp_close": closedTCPTimeout, "tcp_time_wait": closedTCPTimeout},
	}
}
