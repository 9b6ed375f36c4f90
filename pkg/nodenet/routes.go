package nodenet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
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
// are not wanted are deleted, missing or different ones are replaced, in batches (writeRoutes);
// routes already as wanted are not written. Routes of any other protocol are never touched.
// One bad route does not stop the others; the errors are joined.
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
	wanted := make(map[routeKey]*netlink.Route, len(want))
	links := linkIndexes{nl: nl, byName: map[string]int{}}
	for _, r := range want {
		nr, err := toNetlink(links, r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		wanted[keyOf(nr)] = nr
	}
	present := map[routeKey]bool{}
	var ops []routeOp
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
		ops = append(ops, routeOp{del: true, route: &have[i]})
	}
	keys := make([]routeKey, 0, len(wanted))
	for k := range wanted {
		if !present[k] {
			keys = append(keys, k)
		}
	}
	// Routes straight out of a device first: they may be next hops of the others.
	sort.Slice(keys, func(i, j int) bool { return !keys[i].via.IsValid() && keys[j].via.IsValid() })
	for _, k := range keys {
		ops = append(ops, routeOp{route: wanted[k]})
	}
	return errors.Join(append(errs, h.applyRouteOps(ops))...)
}

// linkIndexes looks interface indexes up once per name: thousands of routes share one device.
type linkIndexes struct {
	nl     *netlink.Handle
	byName map[string]int
}

func (l linkIndexes) index(name string) (int, error) {
	if i, ok := l.byName[name]; ok {
		return i, nil
	}
	link, err := l.nl.LinkByName(name)
	if err != nil {
		return 0, err
	}
	l.byName[name] = link.Attrs().Index
	return link.Attrs().Index, nil
}

// ChangeRoutes deletes del and adds (replaces) add, in that order and in batches, without
// listing the table: the caller knows what it installed (Reconciler between full syncs). A
// route of del that is already gone is no error.
func (h Host) ChangeRoutes(del, add []Route) error {
	if len(del)+len(add) == 0 {
		return nil
	}
	nl, err := h.handle()
	if err != nil {
		return err
	}
	defer nl.Close()
	links := linkIndexes{nl: nl, byName: map[string]int{}}
	var errs []error
	ops := make([]routeOp, 0, len(del)+len(add))
	for i, r := range append(slices.Clip(del), add...) {
		nr, err := toNetlink(links, r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ops = append(ops, routeOp{del: i < len(del), route: nr})
	}
	return errors.Join(append(errs, h.applyRouteOps(ops))...)
}

// applyRouteOps writes ops (writeRoutes) and joins the errors of those that failed.
func (h Host) applyRouteOps(ops []routeOp) error {
	results, err := h.writeRoutes(ops)
	if err != nil {
		return fmt.Errorf("writing %d host route changes: %w", len(ops), err)
	}
	var errs []error
	for i, op := range ops {
		what := "adding"
		if op.del {
			what = "deleting"
		}
		if err := results[i]; err != nil && !errIgnorable(op, err) {
			errs = append(errs, fmt.Errorf("%s host route %s: %w", what, op.route.String(), err))
		} else if v := klog.V(4); v.Enabled() {
			v.InfoS("Host route changed", "change", what, "route", op.route.String())
		}
	}
	return errors.Join(errs...)
}

func toNetlink(links linkIndexes, r Route) (*netlink.Route, error) {
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
		idx, err := links.index(r.Dev)
		if err != nil {
			return nil, fmt.Errorf("host route %s: %w", r, err)
		}
		nr.LinkIndex = idx
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
