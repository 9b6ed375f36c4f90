package nodenet

// This file is the port-granular half of the host path into OVS: the programmed LoadBalancer
// IPs and the ExternalIPs go into OVS only on the (address, protocol, port) tuples a Service
// programs. The agent's nftables table marks such packets (ServicePortMark) before the routing
// decision: in a prerouting chain after DNAT (markPriority) for traffic from outside the node (not
// from the gateway), in a route chain on output for the node's own traffic (the kernel routes a
// locally generated packet again when a route chain changes its mark). A policy rule sends
// marked packets to ServicePortTable, whose one route per family leads into OVS like the other
// routes into OVS: via the Service virtual IP, on the gateway, onlink. Every other packet to the
// same address follows the main table, as if no Service existed. Unlike a host route per
// address, a Service author who names another machine's address (an ExternalIP is any address)
// takes over only the ports the Service defines, as kube-proxy does.

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

const (
	// ServicePortMark is the packet mark bit (fwmark) the agent's nftables table sets on
	// packets to a Service's programmed (address, protocol, port) tuple. It avoids the bits
	// other node networking uses by default: kube-proxy's masquerade bit (14, 0x4000) and the
	// kubelet's drop mark (0x8000), Calico's mark mask (0xffff0000) and Cilium's magic marks
	// (0x0f00). The agent only ORs it in, and
	// its policy rule matches it under its own mask, so other bits of the mark are left alone.
	ServicePortMark uint32 = 0x1000
	// ServicePortTable is the routing table of marked packets: one default route per family
	// via the Service virtual IP on the gateway. Above 255, away from Calico's default table
	// range (1-250).
	ServicePortTable = 9700
	// ServicePortRulePriority is the priority of the policy rule `fwmark ServicePortMark/
	// ServicePortMark lookup ServicePortTable`, one per family: before the main table's
	// (32766), after the local table's (0), so node addresses stay local.
	ServicePortRulePriority = 9700
)

// Rule is a policy routing rule the agent owns: packets whose mark has every bit of Mark
// (matched under the mask Mark) look Table up.
type Rule struct {
	IPv6     bool
	Priority int
	Mark     uint32
	Table    int
}

func (r Rule) String() string {
	fam := "ip"
	if r.IPv6 {
		fam = "ip6"
	}
	return fmt.Sprintf("%s rule pref %d fwmark %#x/%#x lookup %d", fam, r.Priority, r.Mark, r.Mark, r.Table)
}

// SyncServicePortRouting makes rules the agent's policy rules (the rules that look
// ServicePortTable up, any other is never touched) and routes the agent's routes in
// ServicePortTable (those of RouteProtocol), deleting what is not wanted and adding what is
// missing. Idempotent: what is already as wanted is not written. Called with nothing, it removes
// them all.
func (h Host) SyncServicePortRouting(rules []Rule, routes []Route) error {
	nl, err := h.handle()
	if err != nil {
		return err
	}
	defer nl.Close()
	return errors.Join(h.syncRules(nl, rules), syncTableRoutes(nl, routes))
}

func (h Host) syncRules(nl *netlink.Handle, rules []Rule) error {
	var errs []error
	for _, v6 := range []bool{false, true} {
		family := netlink.FAMILY_V4
		if v6 {
			family = netlink.FAMILY_V6
		}
		have, err := nl.RuleListFiltered(family, &netlink.Rule{Table: ServicePortTable}, netlink.RT_FILTER_TABLE)
		if err != nil {
			// A family the kernel does not route (IPv6 disabled) is only an error when wanted.
			if slices.ContainsFunc(rules, func(r Rule) bool { return r.IPv6 == v6 }) {
				errs = append(errs, fmt.Errorf("listing policy rules: %w", err))
			}
			continue
		}
		present := map[Rule]bool{}
		for i := range have {
			got := Rule{IPv6: v6, Priority: have[i].Priority, Mark: have[i].Mark, Table: have[i].Table}
			if have[i].Mask != nil && *have[i].Mask == got.Mark && wantsRule(rules, got) && !present[got] {
				present[got] = true
				continue
			}
			if err := nl.RuleDel(&have[i]); err != nil && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("deleting policy rule %s: %w", have[i].String(), err))
			} else {
				klog.V(2).InfoS("Policy rule deleted", "rule", have[i].String())
			}
		}
		for _, r := range rules {
			if r.IPv6 != v6 || present[r] {
				continue
			}
			nr := netlink.NewRule()
			nr.Family, nr.Priority, nr.Table, nr.Mark, nr.Mask = family, r.Priority, r.Table, r.Mark, &r.Mark
			nr.Protocol = uint8(RouteProtocol)
			if err := nl.RuleAdd(nr); err != nil && !errors.Is(err, unix.EEXIST) {
				errs = append(errs, fmt.Errorf("adding %s: %w", r, err))
				continue
			}
			present[r] = true
			klog.V(2).InfoS("Policy rule added", "rule", r.String())
		}
	}
	return errors.Join(errs...)
}

func wantsRule(rules []Rule, r Rule) bool { return slices.Contains(rules, r) }

// syncTableRoutes makes routes the agent's routes in ServicePortTable.
func syncTableRoutes(nl *netlink.Handle, routes []Route) error {
	have, err := nl.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: ServicePortTable, Protocol: RouteProtocol},
		netlink.RT_FILTER_TABLE|netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		return fmt.Errorf("listing routes of table %d: %w", ServicePortTable, err)
	}
	var errs []error
	links := linkIndexes{nl: nl, byName: map[string]int{}}
	wanted := map[routeKey]*netlink.Route{}
	for _, r := range routes {
		nr, err := toNetlink(links, r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		nr.Table = ServicePortTable
		wanted[keyOf(nr)] = nr
	}
	for i := range have {
		k := keyOf(&have[i])
		if _, ok := wanted[k]; ok {
			delete(wanted, k)
			continue
		}
		if err := nl.RouteDel(&have[i]); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("deleting route %s of table %d: %w", have[i].String(), ServicePortTable, err))
		}
	}
	for _, nr := range wanted {
		if err := nl.RouteReplace(nr); err != nil {
			errs = append(errs, fmt.Errorf("adding route %s to table %d: %w", nr.String(), ServicePortTable, err))
			continue
		}
		klog.V(2).InfoS("Route added", "route", nr.String(), "table", ServicePortTable)
	}
	return errors.Join(errs...)
}

// rpFilterLoose is the value of rp_filter for loose reverse-path filtering.
const rpFilterLoose = "2"

// LooseRPFilter sets IPv4 reverse-path filtering on dev to loose (rp_filter=2; the kernel
// applies the larger of conf/all and conf/<dev>, so this holds whatever conf/all says). The
// replies of Service connections that entered OVS through a mark come back from the gateway
// with a source address (the LB IP or ExternalIP) that the main table routes elsewhere: strict
// filtering would drop them.
func (h Host) LooseRPFilter(dev string) error {
	return h.do(func() error {
		if err := writeSysctl("/proc/sys/net/ipv4/conf/"+dev+"/rp_filter", rpFilterLoose); err != nil {
			return fmt.Errorf("setting loose reverse-path filtering on %s: %w", dev, err)
		}
		return nil
	})
}

// defaultPrefix is the default route's destination in a's family.
func defaultPrefix(a netip.Addr) netip.Prefix {
	if a.Is6() {
		return netip.PrefixFrom(netip.IPv6Unspecified(), 0)
	}
	return netip.PrefixFrom(netip.IPv4Unspecified(), 0)
}
