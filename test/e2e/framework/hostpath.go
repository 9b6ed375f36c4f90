package framework

import (
	"fmt"
	"regexp"
	"strings"
)

// servicePortElement matches one element of the agent's service-ports sets as `nft list set`
// prints it: address . protocol . port.
var servicePortElement = regexp.MustCompile(`([0-9a-fA-F:.]+) \. (?:tcp|udp|sctp) \. [0-9]+`)

// ServicePortAddrs lists the addresses whose Service ports the node's host sends into OVS (the
// programmed LB IPs and the ExternalIPs: the elements of the agent's service-ports-v4 and
// service-ports-v6 nftables sets, docs/design/ovs-pipeline.md "The host side").
func (n *Node) ServicePortAddrs() (map[string]bool, error) {
	addrs := map[string]bool{}
	for _, set := range []string{"service-ports-v4", "service-ports-v6"} {
		out, err := n.NS.Exec("nft", "list", "set", "inet", nftTable, set)
		if err != nil && strings.Contains(out, "No such file or directory") {
			return addrs, nil // no table (yet): nothing is sent into OVS
		}
		if err != nil {
			return nil, fmt.Errorf("node %s: listing the %s set: %w: %s", n.Name, set, err, out)
		}
		for _, m := range servicePortElement.FindAllStringSubmatch(out, -1) {
			addrs[m[1]] = true
		}
	}
	return addrs, nil
}
