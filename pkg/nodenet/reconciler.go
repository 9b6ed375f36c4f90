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
	// ProxyAll sends NodePort traffic and traffic to programmed LoadBalancer IPs and
	// ExternalIPs from outside the node into OVS.
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
	// exposureKnown is false until the first SetExposure: until then Sync changes nothing, so
	// that a restarted agent does not wipe the NodePort rules and LB IP routes its predecessor
	// left before its proxier has synced once.
	exposureKnown bool
	kick          chan struct{}
	// syncMu serializes Sync and Resync.
	syncMu sync.Mutex
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
}

// Desired computes the routes, neighbours and nftables content for the current inputs.
func (r *Reconciler) Desired() Desired {
	r.mu.Lock()
	nodes := maps.Clone(r.nodes)
	exp := r.exposure
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
	intoOVS := func(a netip.Addr) {
		if via, ok := virtualFor(c.ServiceVirtualIPs, a); ok && r.serves(a) && r.serves(via) {
			d.Routes = append(d.Routes, Route{Dst: netip.PrefixFrom(a, a.BitLen()), Via: via, Dev: c.Gateway, OnLink: true})
		}
	}
	for _, v := range c.NodePortVirtualIPs {
		if r.serves(v) {
			d.NFT.NodePortVirtualIPs = append(d.NFT.NodePortVirtualIPs, v)
			intoOVS(v)
		}
	}
	for _, ip := range exp.IPs {
		intoOVS(ip)
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

// Sync applies the desired state once.
func (r *Reconciler) Sync(ctx context.Context) error {
	r.syncMu.Lock()
	defer r.syncMu.Unlock()
	return r.syncLocked(ctx)
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
	err := r.syncLocked(ctx)
	if err != nil {
		r.trigger()
	}
	return err
}

// syncLocked is Sync with syncMu held.
func (r *Reconciler) syncLocked(ctx context.Context) error {
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
	if err := r.cfg.Host.SyncRoutes(d.Routes); err != nil {
		errs = append(errs, err)
	}
	if err := r.nft.Sync(ctx, d.NFT); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("node network: %w", err)
	}
	klog.V(2).InfoS("Node network synced", "routes", len(d.Routes), "nodePorts", describeNodePorts(d.NFT.NodePorts))
	return nil
}

// Run syncs now, then whenever an input changes and every ResyncPeriod, until ctx is done. A
// failed sync is retried with exponential backoff (1 s up to 30 s).
func (r *Reconciler) Run(ctx context.Context) {
	const minBackoff, maxBackoff = time.Second, 30 * time.Second
	backoff := minBackoff
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.kick:
		case <-timer.C:
		}
		next := r.cfg.ResyncPeriod
		if err := r.Sync(ctx); err != nil {
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
