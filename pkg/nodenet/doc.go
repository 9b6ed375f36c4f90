// Package nodenet is the host side of antrea-agent's node data path: the host gateway
// (antrea-gw0, an OVS internal port holding the first address of each podCIDR), the host routes
// (remote Nodes' podCIDRs through their InternalIP, and the virtual IPs, ServiceCIDRs or
// ClusterIPs and announced LB IPs that go into OVS through the gateway, written in netlink
// batches), the policy rule and table that send marked Service ports (of LB IPs and ExternalIPs)
// into OVS, the static neighbour of the virtual next hop, and the agent's one nftables table
// (masquerade of pod traffic leaving the node, DNAT of NodePort traffic to the NodePort virtual
// IP, the mark of packets to a Service's LB IP or ExternalIP port, SNAT of the node's own
// connections into OVS to the gateway's address). Everything is done through
// netlink and knftables in a host network namespace given by path ("" is the agent's own), so
// that tests can run several nodes on one machine.
package nodenet
