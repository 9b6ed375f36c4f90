package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/cni/server"
	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	"github.com/antrea-proxy/antrea-proxy/pkg/model"
	"github.com/antrea-proxy/antrea-proxy/pkg/nodenet"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/observe"
)

// virtualMAC is the static neighbour MAC of the virtual next hop on the gateway. It never leaves
// the node: OVS rewrites the destination MAC of everything it forwards.
var virtualMAC = net.HardwareAddr{0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}

// ServiceSource is the proxier as the node data path sees it: its installed Services say which
// NodePorts, LoadBalancer IPs and ExternalIPs the host must send into OVS, and
// NodePortAddresses on which node addresses its flows serve the NodePorts.
type ServiceSource interface {
	Services() []proxy.ServiceStatus
	NodePortAddresses() []netip.Addr
	SyncState() (last time.Time, syncs int, err error)
	// ServiceCIDRs are the cluster's ServiceCIDRs the proxier's flows use (none when the API
	// is absent): the host routes each into OVS with one route.
	ServiceCIDRs() []netip.Prefix
	// PortsGeneration changes whenever Services' ports, NodePortAddresses or ServiceCIDRs do;
	// the exposure is derived from those alone (proxy.Proxier.PortsGeneration).
	PortsGeneration() uint64
}

// DataPathOptions configure the node data path.
type DataPathOptions struct {
	Config *config.AgentConfig
	// HostNetNS is the path of the host network namespace; "" is the agent's own.
	HostNetNS string
	// OVSDB creates and deletes ports (an *ovsdb.Client).
	OVSDB server.OVSPorts
	// Bridge installs flows.
	Bridge openflow.Bridge
	// Round is this run's flow round (saved by Setup before anything is installed); the
	// proxier installs the same round.
	Round uint16
	// CNI reports the CNI server's state problems and registers its metrics (cnireport.go).
	CNI CNIReporting
}

// DataPath is the agent's node data path: the host gateway and its flows, the host routes and
// nftables rules (pkg/nodenet), and the CNI server (pkg/cni/server).
type DataPath struct {
	opts  DataPathOptions
	cfg   *config.AgentConfig
	host  nodenet.Host
	gw    *nodenet.Gateway
	round uint16
	// nodePortVIPs and serviceVIPs are the virtual IPs, IPv4 first.
	nodePortVIPs, serviceVIPs []netip.Addr

	// Set by Start.
	podCIDRs []netip.Prefix
	// exposeMu guards rec, services and exposure for SyncDone, which the proxier calls from
	// its own goroutine.
	exposeMu sync.Mutex
	services ServiceSource
	rec      *nodenet.Reconciler
	// exposure is what the proxier last installed (pushed by SyncDone), derived from the
	// proxier's state at its PortsGeneration exposedGen; exposed is false until the first push.
	exposure   nodenet.Exposure
	exposedGen uint64
	exposed    bool
	// announceKick wakes the announcer when the exposure changes.
	announceKick chan struct{}
	// lease, when set, is this node's announcer Lease: the announcer announces only while it is
	// valid, and at shutdown releases it and waits (at most handoverTimeout) until handover's
	// Services no longer name this node before it withdraws (announcelease.go).
	lease           *AnnouncerLease
	handoverSvcs    corev1client.ServiceInterface
	handoverTimeout time.Duration
	// gwFlows installs the gateway flows and knows how many OVS should hold.
	gwFlows gatewayFlowSet
	cni     *server.Server
	wg      sync.WaitGroup
	errMu   sync.Mutex
	errs    []error
}

// RoundStore keeps the flow round number across agent restarts (in the bridge's external_ids).
type RoundStore interface {
	// LoadRound returns the last saved round, or ok=false when none was saved.
	LoadRound(ctx context.Context) (round uint16, ok bool, err error)
	// SaveRound records the round this run installs.
	SaveRound(ctx context.Context, round uint16) error
}

// nextRound returns the round this agent run installs: the one after the saved round.
func nextRound(ctx context.Context, rounds RoundStore) (uint16, error) {
	prev, ok, err := rounds.LoadRound(ctx)
	if err != nil {
		return 0, fmt.Errorf("loading flow round: %w", err)
	}
	if !ok || prev+1 == 0 {
		return 1, nil
	}
	return prev + 1, nil
}

// NewDataPath creates (or keeps) the host gateway port and interface. It needs no Node yet:
// addresses, routes, rules and the CNI server come with Start.
func NewDataPath(ctx context.Context, opts DataPathOptions) (*DataPath, error) {
	cfg := opts.Config
	if opts.Round == 0 {
		return nil, fmt.Errorf("data path: Round is required")
	}
	d := &DataPath{opts: opts, cfg: cfg, host: nodenet.Host{NetNS: opts.HostNetNS}, round: opts.Round, gwFlows: gatewayFlowSet{installed: -1},
		announceKick: make(chan struct{}, 1)}
	d.nodePortVIPs, d.serviceVIPs = cfg.NodeNetwork.VirtualIPs()
	var err error
	d.gw, err = d.host.EnsureGateway(ctx, opts.OVSDB, d.gatewayConfig())
	if err != nil {
		return nil, err
	}
	return d, nil
}

// Gateway returns the host gateway.
func (d *DataPath) Gateway() *nodenet.Gateway { return d.gw }

// Round returns the flow round of the gateway and pod flows.
func (d *DataPath) Round() uint16 { return d.round }

// ProxyOptions points the proxier at the gateway: its port classifies packets from the host,
// and the Service virtual IPs are the SNAT sources of external connections (table
// ServiceSNAT). The SNAT source must not be the gateway's own address: a reply from a remote
// endpoint to it would be delivered to the host instead of being routed back into OVS.
func (d *DataPath) ProxyOptions(o *proxy.Options) {
	o.GatewayOFPort = d.gw.OFPort
	o.GatewayIPv4, o.GatewayIPv6 = d.serviceVIPs[0], d.serviceVIPs[1]
}

// Start waits for this Node's podCIDRs, then sets up the gateway addresses and flows, the host
// routes and nftables rules (kept up to date from the Node informer and services), and starts
// the CNI server. It returns once the CNI server answers; the rest runs until ctx is done (see
// Wait).
func (d *DataPath) Start(ctx context.Context, factory informers.SharedInformerFactory, services ServiceSource) error {
	nodeInf := factory.Core().V1().Nodes()
	inf := nodeInf.Informer()
	var recMu sync.Mutex // guards rec until it exists; events before that are replayed from the lister
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { d.onNode(&recMu, obj) },
		UpdateFunc: func(_, obj any) { d.onNode(&recMu, obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if n, ok := obj.(*v1.Node); ok {
				recMu.Lock()
				defer recMu.Unlock()
				if d.rec != nil {
					d.rec.DeleteNode(n.Name)
				}
			}
		},
	}); err != nil {
		return fmt.Errorf("adding Node handler: %w", err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return fmt.Errorf("waiting for the Node cache: %w", ctx.Err())
	}
	local, err := d.waitForPodCIDRs(ctx, nodeInf.Lister().Get)
	if err != nil {
		return err
	}
	recMu.Lock()
	d.podCIDRs = model.NodePodCIDRs(local)
	recMu.Unlock()
	if err := d.setupGateway(ctx); err != nil {
		return err
	}
	nft, err := nodenet.NewNFT(d.host, nodenet.DefaultNFTablesTable)
	if err != nil {
		return err
	}
	ipv4, ipv6 := families(d.podCIDRs)
	rec := nodenet.NewReconciler(nodenet.Config{
		Host: d.host, LocalNode: d.cfg.NodeName, Gateway: d.gw.Name, IPv4: ipv4, IPv6: ipv6,
		ClusterCIDRs: d.cfg.NodeNetwork.ClusterPrefixes(), ProxyAll: d.cfg.AntreaProxy.ProxyAll,
		NodePortVirtualIPs: d.nodePortVIPs, ServiceVirtualIPs: d.serviceVIPs,
		VirtualMAC: virtualMAC,
	}, nft)
	nodes, err := nodeInf.Lister().List(labels.Everything())
	if err != nil {
		return fmt.Errorf("listing Nodes: %w", err)
	}
	recMu.Lock()
	for _, n := range nodes {
		rec.SetNode(nodeInfo(n))
	}
	d.exposeMu.Lock()
	d.rec, d.services = rec, services
	d.exposeMu.Unlock()
	recMu.Unlock()
	switch {
	case services == nil:
		rec.SetExposure(nodenet.Exposure{}) // no proxier: nothing to expose
	default:
		if _, syncs, _ := services.SyncState(); syncs > 0 {
			d.exposeFrom(services, false)
		}
	}
	// The first sync runs here so that routes and rules exist when Start returns; failures are
	// retried by Run.
	if err := rec.Sync(ctx); err != nil {
		klog.ErrorS(err, "First node network sync failed; retrying in the background")
	}
	d.goRun(func() error { rec.Run(ctx); return nil })
	if services != nil {
		d.goRun(func() error { return d.runAnnouncer(ctx, factory) })
	}
	return d.startCNI(ctx)
}

func (d *DataPath) onNode(mu *sync.Mutex, obj any) {
	n, ok := obj.(*v1.Node)
	if !ok {
		return
	}
	mu.Lock()
	defer mu.Unlock()
	if d.rec != nil {
		d.rec.SetNode(nodeInfo(n))
	}
	if n.Name == d.cfg.NodeName && d.podCIDRs != nil {
		if got := model.NodePodCIDRs(n); !equalPrefixes(got, d.podCIDRs) {
			klog.InfoS("The Node's podCIDRs changed; restart the agent to use them", "node", n.Name, "podCIDRs", got, "inUse", d.podCIDRs)
		}
	}
}

// goRun runs fn on a goroutine counted by Wait.
func (d *DataPath) goRun(fn func() error) {
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		if err := fn(); err != nil {
			d.errMu.Lock()
			d.errs = append(d.errs, err)
			d.errMu.Unlock()
		}
	}()
}

// Wait waits, after Start's ctx is done, for the data path's goroutines and returns their
// errors.
func (d *DataPath) Wait() error {
	d.wg.Wait()
	d.errMu.Lock()
	defer d.errMu.Unlock()
	return errors.Join(d.errs...)
}

// waitForPodCIDRs polls until this Node exists with at least one podCIDR.
func (d *DataPath) waitForPodCIDRs(ctx context.Context, get func(string) (*v1.Node, error)) (*v1.Node, error) {
	logged := false
	for {
		n, err := get(d.cfg.NodeName)
		if err == nil && len(model.NodePodCIDRs(n)) > 0 {
			klog.InfoS("Node podCIDRs", "node", n.Name, "podCIDRs", model.NodePodCIDRs(n))
			return n, nil
		}
		if !logged {
			klog.InfoS("Waiting for this Node to have a podCIDR", "node", d.cfg.NodeName)
			logged = true
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for Node %s to have a podCIDR: %w", d.cfg.NodeName, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// QueuedUpdate and NodeUpdated make DataPath an observe.Observer; only SyncDone matters.
func (d *DataPath) QueuedUpdate()        {}
func (d *DataPath) NodeUpdated(*v1.Node) {}

// SyncDone is the one path by which the proxier's exposure reaches the host: right after each
// successful sync the routes, nftables rules and LB IP announcements follow the flows.
func (d *DataPath) SyncDone(res observe.SyncResult) {
	if res.Err != nil {
		return
	}
	d.exposeMu.Lock()
	services := d.services
	d.exposeMu.Unlock()
	if services != nil {
		d.exposeFrom(services, true)
	}
}

// exposeFrom pushes the exposure of what services installed. With unlessSame, it returns at once
// when the proxier's PortsGeneration is the one last pushed: an idle resync or an endpoint
// change leaves the exposure as it was, and deriving it walks every Service. The generation is
// read before the Services, so a change committed in between is pushed at the next sync.
func (d *DataPath) exposeFrom(services ServiceSource, unlessSame bool) {
	gen := services.PortsGeneration()
	d.exposeMu.Lock()
	same := d.exposed && d.exposedGen == gen
	d.exposeMu.Unlock()
	if unlessSame && same {
		return
	}
	d.pushExposure(gen, exposureOf(services.Services(), services.NodePortAddresses(), services.ServiceCIDRs()))
}

// pushExposure hands what the proxier installed (at its PortsGeneration gen) to the reconciler
// and the announcer. Only what a sync installed counts: before the first one nothing is pushed,
// and the rules a previous agent left for live traffic stay.
func (d *DataPath) pushExposure(gen uint64, e nodenet.Exposure) {
	d.exposeMu.Lock()
	rec := d.rec
	d.exposure, d.exposedGen, d.exposed = e, gen, true
	d.exposeMu.Unlock()
	if rec != nil {
		rec.SetExposure(e)
	}
	select {
	case d.announceKick <- struct{}{}:
	default:
	}
}

// exposedIPs returns the addresses of the LB IPs and ExternalIPs the proxier last installed.
func (d *DataPath) exposedIPs() []netip.Addr {
	d.exposeMu.Lock()
	defer d.exposeMu.Unlock()
	return d.exposure.PortAddrs()
}

// setAnnounced tells the reconciler which LB IPs the announcer answers ARP and NDP for.
func (d *DataPath) setAnnounced(ips []netip.Addr) {
	d.exposeMu.Lock()
	rec := d.rec
	d.exposeMu.Unlock()
	if rec != nil {
		rec.SetAnnounced(ips)
	}
}

func nodeInfo(n *v1.Node) nodenet.NodeInfo {
	info := nodenet.NodeInfo{Name: n.Name, PodCIDRs: model.NodePodCIDRs(n)}
	for _, a := range n.Status.Addresses {
		if a.Type != v1.NodeInternalIP {
			continue
		}
		if ip, err := netip.ParseAddr(a.Address); err == nil {
			info.InternalIPs = append(info.InternalIPs, ip.Unmap())
		}
	}
	return info
}

func families(prefixes []netip.Prefix) (ipv4, ipv6 bool) {
	f := model.FamiliesOf(prefixes)
	return f.IPv4, f.IPv6
}

func equalPrefixes(a, b []netip.Prefix) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// setupDataPath creates the node data path when nodeNetwork is enabled and points the proxier
// options at its gateway; nil when disabled.
func setupDataPath(ctx context.Context, cfg *config.AgentConfig, db server.OVSPorts, bridge openflow.Bridge,
	opts *proxy.Options) (*DataPath, error) {
	if !cfg.NodeNetwork.Enabled() {
		klog.InfoS("Node data path disabled (nodeNetwork.enable=false)")
		return nil, nil
	}
	dp, err := NewDataPath(ctx, DataPathOptions{Config: cfg, OVSDB: db, Bridge: bridge, Round: opts.Round})
	if err != nil {
		return nil, err
	}
	dp.ProxyOptions(opts)
	return dp, nil
}

// startDataPath starts c's node data path, if any, with the proxier as its Service source.
func startDataPath(ctx context.Context, c *Components, factory informers.SharedInformerFactory) error {
	if c.DataPath == nil {
		return nil
	}
	return c.DataPath.Start(ctx, factory, c.Proxier)
}
