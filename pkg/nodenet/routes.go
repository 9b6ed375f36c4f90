package nodenet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sort"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// RouteProtocol marks the routes the agent owns (rtm_protocol): SyncRoutes only ever lists,
// changes and deletes routes with this protocol in the main table.
const RouteProtocol netlink.RouteProtocol = 0x61

// Route is a host route the agent wants in the main routing table.
type Route struct {
	// Dst is the destination.
	Dst netip.Prefix
	// Via is the next hop; invalid for a route straight out of Dev.
	Via netip.Addr
	// Dev is the outgoing interface; "" lets the kernel pick it from Via.
	Dev string
	// OnLink declares Via reachable on Dev without a route to it (the virtual next hop).
	OnLink bool
}

func (r Route) String() string {
	s := r.Dst.String()
	if r.Via.IsValid() {
		s += " via " + r.Via.String()
	}
	if r.Dev != "" {
		s += " dev " + r.Dev
	}
	if r.OnLink {
		s += " onlink"
	}
	return s
}

// routeKey identifies a route for comparison: destination, next hop, and the interface when
// the desired route names one.
type routeKey struct {
	dst    netip.Prefix
	via    netip.Addr
	ifidx  int
	onlink bool
}

// SyncRoutes makes want the agent's routes in the host namespace: routes of RouteProtocol that
// are not wanted are deleted, missing or different ones are replaced. Routes of any other
// protocol are never touched. One bad route does not stop the others; the errors are joined.
func (h Host) SyncRoutes(want []Route) error {
	nl, err := h.handle()
	if err != nil {
		return err
	}
	defer nl.Close()
	filter := &netlink.Route{Protocol: RouteProtocol, Table: unix.RT_TABLE_MAIN}
	have, err := nl.RouteListFiltered(netlink.FAMILY_ALL, filter, netlink.RT_FILTER_PROTOCOL|netlink.RT_FILTER_TABLE)
	if err != nil {
		return fmt.Errorf("listing host routes: %w", err)
	}
	var errs []error
	wanted := map[routeKey]*netlink.Route{}
	for _, r := range want {
		nr, err := toNetlink(nl, r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		wanted[keyOf(nr)] = nr
	}
	present := map[routeKey]bool{}
	for i := range have {
		k := keyOf(&have[i])
		if _, ok := wanted[k]; !ok {
			// A wanted route without a device gets one from the kernel.
			k.ifidx = 0
		}
		if _, ok := wanted[k]; ok {
			present[k] = true
			continue
		}
		if err := nl.RouteDel(&have[i]); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("deleting host route %s: %w", have[i].String(), err))
			continue
		}
		klog.V(2).InfoS("Deleted host route", "route", have[i].String())
	}
	keys := make([]routeKey, 0, len(wanted))
	for k := range wanted {
		keys = append(keys, k)
	}
	// Routes straight out of a device first: they may be next hops of the others.
	sort.Slice(keys, func(i, j int) bool { return !keys[i].via.IsValid() && keys[j].via.IsValid() })
	for _, k := range keys {
		if present[k] {
			continue
		}
		if err := nl.RouteReplace(wanted[k]); err != nil {
			errs = append(errs, fmt.Errorf("adding host route %s: %w", wanted[k].String(), err))
			continue
		}
		klog.V(2).InfoS("Added host route", "route", wanted[k].String())
	}
	return errors.Join(errs...)
}

func toNetlink(nl *netlink.Handle, r Route) (*netlink.Route, error) {
	if !r.Dst.IsValid() {
		return nil, fmt.Errorf("host route %s: no destination", r)
	}
	nr := &netlink.Route{Dst: ipNet(r.Dst.Masked()), Protocol: RouteProtocol, Table: unix.RT_TABLE_MAIN,
		Family: unix.AF_INET}
	if r.Dst.Addr().Is6() {
		nr.Family = unix.AF_INET6
	}
	if r.Via.IsValid() {
		if r.Via.Is6() != r.Dst.Addr().Is6() {
			return nil, fmt.Errorf("host route %s: next hop of another family", r)
		}
		nr.Gw = net.IP(r.Via.AsSlice())
	} else {
		nr.Scope = netlink.SCOPE_LINK
	}
	if r.Dev != "" {
		link, err := nl.LinkByName(r.Dev)
		if err != nil {
			return nil, fmt.Errorf("host route %s: %w", r, err)
		}
		nr.LinkIndex = link.Attrs().Index
	} else if !r.Via.IsValid() {
		return nil, fmt.Errorf("host route %s: neither next hop nor device", r)
	}
	if r.OnLink {
		nr.Flags = int(netlink.FLAG_ONLINK)
	}
	return nr, nil
}

func keyOf(r *netlink.Route) routeKey {
	k := routeKey{ifidx: r.LinkIndex, onlink: r.Flags&int(netlink.FLAG_ONLINK) != 0}
	if p, ok := prefixOf(r.Dst); ok {
		k.dst = p
	}
	if ip, ok := netip.AddrFromSlice(r.Gw); ok {
		k.via = ip.Unmap()
	}
	return k
}

// Neighbor is a permanent neighbour entry: the virtual next hop's MAC on the gateway.
type Neighbor struct {
	IP  netip.Addr
	MAC net.HardwareAddr
	Dev string
}

// SetNeighbors installs permanent neighbour entries (replacing what is there for those IPs).
func (h Host) SetNeighbors(neighs []Neighbor) error {
	nl, err := h.handle()
	if err != nil {
		return err
	}
	defer nl.Close()
	var errs []error
	for _, n := range neighs {
		link, err := nl.LinkByName(n.Dev)
		if err != nil {
			errs = append(errs, fmt.Errorf("neighbour %s on %s: %w", n.IP, n.Dev, err))
			continue
		}
		family := unix.AF_INET
		if n.IP.Is6() {
			family = unix.AF_INET6
		}
		err = nl.NeighSet(&netlink.Neigh{LinkIndex: link.Attrs().Index, Family: family, State: netlink.NUD_PERMANENT,
			IP: net.IP(n.IP.AsSlice()), HardwareAddr: n.MAC})
		if err != nil {
			errs = append(errs, fmt.Errorf("neighbour %s lladdr %s on %s: %w", n.IP, n.MAC, n.Dev, err))
		}
	}
	return errors.Join(errs...)
}
