package nodenet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// NodeInfo is what the host routes and rules need to know about one Node.
type NodeInfo struct {
	Name     string
	PodCIDRs []netip.Prefix
	// InternalIPs are the Node's InternalIP addresses: next hops to its podCIDRs.
	InternalIPs []netip.Addr
}

// Config configures a Reconciler.
type Config struct {
	Host Host
	// LocalNode is this Node's name.
	LocalNode string
	// Gateway is the host gateway's interface name.
	Gateway string
	// IPv4 and IPv6 are the families the node routes.
	IPv4, IPv6 bool
	// ClusterCIDRs are destinations never masqueraded (besides every Node's podCIDRs).
	ClusterCIDRs []netip.Prefix
	// ProxyAll sends NodePort traffic and traffic to the ports of programmed LoadBalancer IPs
	// and ExternalIPs from outside the node into OVS, and the node's own traffic to those and to
	// ClusterIPs.
	ProxyAll bool
	// NodePortVirtualIPs are the DNAT targets of NodePort traffic (one per family).
	NodePortVirtualIPs []netip.Addr
	// ServiceVirtualIPs are, per family, the SNAT source OVS gives external Service
	// connections and the virtual next hop of everything routed into OVS.
	ServiceVirtualIPs []netip.Addr
	// VirtualMAC is the static neighbour MAC of the virtual next hops on the gateway.
	VirtualMAC net.HardwareAddr
	// ResyncPeriod re-applies everything periodically, repairing drift; 0 means one minute.
	ResyncPeriod time.Duration
}

// Reconciler keeps the host routes, the static neighbours and the nftables table in line with
// the Nodes and the Services' exposure. Feed it with SetNode, DeleteNode and SetExposure; Run
// applies changes (and retries failures) on its own goroutine.
type Reconciler struct {
	cfg Config
	nft *NFT

	mu       sync.Mutex
	nodes    map[string]NodeInfo
	exposure Exposure
	// announced are the LB IPs this node answers ARP/NDP for (SetAnnounced).
	announced []netip.Addr
	// exposureKnown is false until the first SetExposure: until then Sync changes nothing, so
	// that a restarted agent does not wipe the NodePort rules and Service port marks its predecessor
	// left before its proxier has synced once.
	exposureKnown bool
	kick          chan struct{}
	// syncMu serializes Sync and Resync.
	syncMu sync.Mutex
	// installed are the routes the last sync installed; nil when not known (before the first
	// sync, after a failed one). Guarded by syncMu.
	installed map[Route]bool
}

// NewReconciler returns a Reconciler that programs nft and the routes of cfg.Host.
func NewReconciler(cfg Config, nft *NFT) *Reconciler {
	if cfg.ResyncPeriod == 0 {
		cfg.ResyncPeriod = time.Minute
	}
	return &Reconciler{cfg: cfg, nft: nft, nodes: map[string]NodeInfo{}, kick: make(chan struct{}, 1)}
}

func (r *Reconciler) trigger() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// SetNode records a Node's latest state.
func (r *Reconciler) SetNode(n NodeInfo) {
	r.mu.Lock()
	old, ok := r.nodes[n.Name]
	r.nodes[n.Name] = n
	r.mu.Unlock()
	if !ok || !nodeInfoEqual(old, n) {
		r.trigger()
	}
}

// DeleteNode forgets a Node.
func (r *Reconciler) DeleteNode(name string) {
	r.mu.Lock()
	_, ok := r.nodes[name]
	delete(r.nodes, name)
	r.mu.Unlock()
	if ok {
		r.trigger()
	}
}

// SetExposure records the Services' exposure.
func (r *Reconciler) SetExposure(e Exposure) {
	r.mu.Lock()
	changed := !r.exposureKnown || !r.exposure.Equal(e)
	r.exposure, r.exposureKnown = e, true
	r.mu.Unlock()
	if changed {
		r.trigger()
	}
}

// SetAnnounced records the LoadBalancer IPs the node answers ARP and NDP for through proxy
// neighbour entries. Linux answers an ARP request for a proxied address only when the route to
// it leaves through another interface than the one the request came in on, so with proxyAll each
// gets a host route into OVS (a whole address: antrea-controller allocated it to a Service,
// which owns it, and the node attracts its traffic by announcing it).
func (r *Reconciler) SetAnnounced(ips []netip.Addr) {
	ips = slices.Clone(ips)
	slices.SortFunc(ips, netip.Addr.Compare)
	ips = slices.Compact(ips)
	r.mu.Lock()
	changed := !slices.Equal(r.announced, ips)
	r.announced = ips
	r.mu.Unlock()
	if changed {
		r.trigger()
	}
}

func nodeInfoEqual(a, b NodeInfo) bool {
	return a.Name == b.Name && slices.Equal(a.PodCIDRs, b.PodCIDRs) && slices.Equal(a.InternalIPs, b.InternalIPs)
}

func (r *Reconciler) serves(a netip.Addr) bool {
	return a.IsValid() && ((a.Is4() && r.cfg.IPv4) || (a.Is6() && r.cfg.IPv6))
}

// virtualFor returns the address of ips in a's family.
func virtualFor(ips []netip.Addr, a netip.Addr) (netip.Addr, bool) {
	for _, v := range ips {
		if v.Is6() == a.Is6() {
			return v, true
		}
	}
	return netip.Addr{}, false
}

// Desired is everything the reconciler programs, computed from its inputs.
type Desired struct {
	Routes    []Route
	Neighbors []Neighbor
	NFT       NFTConfig
	// Rules and TableRoutes (in ServicePortTable) route packets marked ServicePortMark into OVS.
	Rules       []Rule
	TableRoutes []Route
}

// Desired computes the routes, neighbours and nftables content for the current inputs.
func (r *Reconciler) Desired() Desired {
	r.mu.Lock()
	nodes := maps.Clone(r.nodes)
	exp := r.exposure
	announced := r.announced
	r.mu.Unlock()
	c := r.cfg
	var d Desired
	d.NFT = NFTConfig{Gateway: c.Gateway, NoMasquerade: slices.Clone(c.ClusterCIDRs)}
	for _, name := range slices.Sorted(maps.Keys(nodes)) {
		n := nodes[name]
		for _, p := range n.PodCIDRs {
			if !r.serves(p.Addr()) {
				continue
			}
			d.NFT.NoMasquerade = append(d.NFT.NoMasquerade, p)
			if name == c.LocalNode {
				d.NFT.PodCIDRs = append(d.NFT.PodCIDRs, p)
				continue
			}
			// Routed noEncap: a remote podCIDR through the Node's InternalIP of its family.
			if via, ok := virtualFor(n.InternalIPs, p.Addr()); ok {
				d.Routes = append(d.Routes, Route{Dst: p.Masked(), Via: via})
			}
		}
	}
	for _, v := range c.ServiceVirtualIPs {
		if !r.serves(v) {
			continue
		}
		d.NFT.SNATVirtualIPs = append(d.NFT.SNATVirtualIPs, v)
		d.Neighbors = append(d.Neighbors, Neighbor{IP: v, MAC: c.VirtualMAC, Dev: c.Gateway})
		d.Routes = append(d.Routes, Route{Dst: netip.PrefixFrom(v, v.BitLen()), Dev: c.Gateway})
	}
	if !c.ProxyAll {
		return d
	}
	r.desiredIntoOVS(&d, exp, announced)
	for _, p := range d.NFT.PodCIDRs {
		if _, ok := virtualFor(d.NFT.HostSources, p.Addr()); !ok {
			d.NFT.HostSources = append(d.NFT.HostSources, GatewayAddresses([]netip.Prefix{p})[0].Addr())
		}
	}
	// The addresses are the proxier's (Exposure.NodePortAddresses); only the host's own
	// conditions apply here: a served family with a NodePort virtual IP to DNAT to.
	for _, a := range exp.NodePortAddresses {
		if _, ok := virtualFor(d.NFT.NodePortVirtualIPs, a); !ok || !r.serves(a) {
			continue
		}
		for _, np := range exp.NodePorts {
			d.NFT.NodePorts = append(d.NFT.NodePorts, NodePort{Addr: a, Protocol: np.Protocol, Port: np.Port})
		}
	}
	return d
}

// desiredIntoOVS adds to d what proxyAll sends into OVS through the gateway: the NodePort
// virtual IPs, the Service ports (marked, policy-routed), the announced LB IPs, the
// ServiceCIDRs and the ClusterIPs outside them.
func (r *Reconciler) desiredIntoOVS(d *Desired, exp Exposure, announced []netip.Addr) {
	c := r.cfg
	intoOVS := func(dst netip.Prefix) {
		if via, ok := virtualFor(c.ServiceVirtualIPs, dst.Addr()); ok && r.serves(dst.Addr()) && r.serves(via) {
			d.Routes = append(d.Routes, Route{Dst: dst, Via: via, Dev: c.Gateway, OnLink: true})
		}
	}
	host := func(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, a.BitLen()) }
	for _, v := range c.NodePortVirtualIPs {
		if r.serves(v) {
			d.NFT.NodePortVirtualIPs = append(d.NFT.NodePortVirtualIPs, v)
			intoOVS(host(v))
		}
	}
	d.NFT.MarkServicePorts = true
	for _, v := range c.ServiceVirtualIPs {
		if r.serves(v) {
			d.Rules = append(d.Rules, Rule{IPv6: v.Is6(), Priority: ServicePortRulePriority, Mark: ServicePortMark, Table: ServicePortTable})
			d.TableRoutes = append(d.TableRoutes, Route{Dst: defaultPrefix(v), Via: v, Dev: c.Gateway, OnLink: true})
		}
	}
	for _, t := range exp.Ports {
		if _, ok := virtualFor(c.ServiceVirtualIPs, t.Addr); ok && r.serves(t.Addr) {
			d.NFT.ServicePorts = append(d.NFT.ServicePorts, t)
		}
	}
	for _, ip := range announced {
		intoOVS(host(ip))
	}
	// The node's own connections to ClusterIPs go into OVS too, whole addresses (the
	// ServiceCIDRs belong to Services; OVS refuses a port no Service defines); the host SNATs
	// their source to the gateway's address (NFTConfig.HostSources), which OVS takes for the
	// node itself.
	var cidrs []netip.Prefix
	for _, p := range exp.ServiceCIDRs {
		if r.serves(p.Addr()) {
			cidrs = append(cidrs, p.Masked())
			intoOVS(p.Masked())
		}
	}
	for _, ip := range exp.ClusterIPs {
		if !slices.ContainsFunc(cidrs, func(p netip.Prefix) bool { return p.Contains(ip) }) {
			intoOVS(host(ip))
		}
	}
}

// Sync applies the desired state once. Routes are changed by difference with what the last
// sync installed (no listing of the table, which with a route per ClusterIP holds thousands);
// the first sync, and any after a failed route write, compare with the table itself.
func (r *Reconciler) Sync(ctx context.Context) error {
	r.syncMu.Lock()
	defer r.syncMu.Unlock()
	return r.syncLocked(ctx, false)
}

// fullSync is Sync comparing the routes with the table itself, repairing drift.
func (r *Reconciler) fullSync(ctx context.Context) error {
	r.syncMu.Lock()
	defer r.syncMu.Unlock()
	return r.syncLocked(ctx, true)
}

// Resync forgets what the Reconciler believes is programmed and applies the whole desired state
// at once: the host routes, the gateway's static neighbours and the nftables table (even when
// its content did not change). The agent calls it after the gateway interface was re-created
// (a restart of ovs-vswitchd with the userspace datapath drops the routes and neighbour entries
// through it), after Host.RestoreGateway. When it fails, Run retries (with its backoff).
func (r *Reconciler) Resync(ctx context.Context) error {
	r.syncMu.Lock()
	defer r.syncMu.Unlock()
	r.nft.forget()
	err := r.syncLocked(ctx, true)
	if err != nil {
		r.trigger()
	}
	return err
}

// Cleanup removes everything the Reconciler programs outside the gateway interface: the
// nftables table, the policy rules and routes of ServicePortTable, and the agent's routes in the
// main table (RouteProtocol). The next Sync programs everything again.
func (r *Reconciler) Cleanup(ctx context.Context) error {
	r.syncMu.Lock()
	defer r.syncMu.Unlock()
	r.installed = nil
	err := errors.Join(r.nft.Delete(ctx), r.cfg.Host.SyncServicePortRouting(nil, nil), r.cfg.Host.SyncRoutes(nil))
	if err != nil {
		return fmt.Errorf("cleaning up the node network: %w", err)
	}
	klog.InfoS("Node network cleaned up", "table", r.nft.table, "policyTable", ServicePortTable)
	return nil
}

// syncLocked is Sync with syncMu held; full compares the routes with the table.
func (r *Reconciler) syncLocked(ctx context.Context, full bool) error {
	r.mu.Lock()
	known := r.exposureKnown
	r.mu.Unlock()
	if !known {
		klog.V(2).InfoS("Node network sync deferred until the proxier has synced once")
		return nil
	}
	d := r.Desired()
	var errs []error
	if err := r.cfg.Host.SetNeighbors(d.Neighbors); err != nil {
		errs = append(errs, err)
	}
	if err := r.syncRoutes(d.Routes, full); err != nil {
		errs = append(errs, err)
	}
	if err := r.cfg.Host.SyncServicePortRouting(d.Rules, d.TableRoutes); err != nil {
		errs = append(errs, err)
	}
	if len(d.Rules) > 0 {
		if err := r.cfg.Host.LooseRPFilter(r.cfg.Gateway); err != nil {
			errs = append(errs, err)
		}
	}
	if err := r.nft.Sync(ctx, d.NFT); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("node network: %w", err)
	}
	klog.V(2).InfoS("Node network synced", "routes", len(d.Routes), "nodePorts", describeNodePorts(d.NFT.NodePorts),
		"servicePorts", describeNodePorts(d.NFT.ServicePorts))
	return nil
}

// syncRoutes makes want the agent's routes: with full, or when the installed routes are not
// known, through Host.SyncRoutes (which lists the table); otherwise by writing the difference
// with the routes the last sync installed. The installed set is forgotten on failure.
func (r *Reconciler) syncRoutes(want []Route, full bool) error {
	if full || r.installed == nil {
		r.installed = nil
		if err := r.cfg.Host.SyncRoutes(want); err != nil {
			return err
		}
		r.installed = routeSet(want)
		return nil
	}
	next := routeSet(want)
	var del, add []Route
	for rt := range r.installed {
		if !next[rt] {
			del = append(del, rt)
		}
	}
	for _, rt := range want {
		if !r.installed[rt] {
			add = append(add, rt)
		}
	}
	// Routes straight out of a device first: they may be next hops of the others.
	slices.SortStableFunc(add, func(x, y Route) int { return cmpBool(x.Via.IsValid(), y.Via.IsValid()) })
	if err := r.cfg.Host.ChangeRoutes(del, add); err != nil {
		r.installed = nil
		return err
	}
	r.installed = next
	return nil
}

func routeSet(routes []Route) map[Route]bool {
	s := make(map[Route]bool, len(routes))
	for _, rt := range routes {
		s[rt] = true
	}
	return s
}

// cmpBool orders false before true.
func cmpBool(x, y bool) int {
	switch {
	case x == y:
		return 0
	case !x:
		return -1
	default:
		return 1
	}
}

// Run syncs now, then whenever an input changes, until ctx is done; every ResyncPeriod it
// compares the routes with the table itself (fullSync), repairing drift. A failed sync is
// retried with exponential backoff (1 s up to 30 s), comparing with the table.
func (r *Reconciler) Run(ctx context.Context) {
	const minBackoff, maxBackoff = time.Second, 30 * time.Second
	backoff := minBackoff
	timer := time.NewTimer(0)
	defer timer.Stop()
	var sync func(context.Context) error
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.kick:
			sync = r.Sync
		case <-timer.C:
			sync = r.fullSync
		}
		next := r.cfg.ResyncPeriod
		if err := sync(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			klog.ErrorS(err, "Syncing the node network failed; retrying", "backoff", backoff)
			next = backoff
			backoff = min(2*backoff, maxBackoff)
		} else {
			backoff = minBackoff
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(next)
	}
}
