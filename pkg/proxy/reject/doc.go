// Package reject answers connections to Services that have no endpoints, as kube-proxy does:
// a TCP SYN gets a TCP reset, a UDP or SCTP packet an ICMP (ICMPv6) port unreachable, so that
// clients fail at once instead of timing out.
//
// The pipeline sends such packets to the controller (pipeline.RejectAction); a Responder reads
// the packet-ins from an OpenFlow connection (pkg/ovs/ofconn), builds the reply with the
// project's header package, pkg/netutil/packet (BuildReply), and sends it back out of the
// packet's in_port with a packet-out. Replies are
// rate-limited by a token bucket so that a flood of packets to such Services cannot turn the
// agent into an amplifier.
package reject
