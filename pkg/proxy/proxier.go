package proxy

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/tracker"
	"github.com/antrea-proxy/antrea-proxy/pkg/reconciler"
)

// Proxier programs Services into OVS. Create it with New, feed it with informers (Run does that
// for a clientset) and it syncs on its own goroutine.
//
// A sync is four steps (sync.go): gather (drain the trackers, compute the dirty Services),
// plan (pure: state + desired → one bundle, each op attributed to its owners), apply (the
// bundle, without p.mu; a rejected Service is quarantined and the rest re-planned) and commit
// (under p.mu), then after-commit work (conntrack flushes, events, observer) without p.mu.
type Proxier struct {
	opts   Options
	bridge Bridge
	track  *tracker.Tracker
	runner *runner
	round  uint16

	// syncSem serializes syncs and replays (capacity 1; a holder is "the sync goroutine").
	syncSem chan struct{}
	// driftCheck is held (capacity 1) while a full resync's OVS check runs (checkDrift).
	driftCheck chan struct{}

	// Owned by whoever holds syncSem; never read by other goroutines.
	syncNode  *v1.Node
	syncPeers []netip.Addr
	// svcs holds, per Service, its latest object, claims generation, committed inputs and
	// status (svcRecord; the map is written under p.mu, status is guarded by it).
	svcs           map[types.NamespacedName]*svcRecord
	dirty          sets.Set[types.NamespacedName]
	groups         *groupIDs
	ownerEndpoints map[owner]selected // what each UDP owner's groups selected at its last sync
	ctFailed       bool               // the last conntrack reconciliation failed somewhere
	// ownerMeta holds each Service port owner's Service and group IDs (ownerInfo).
	ownerMeta  map[owner]ownerInfo
	quarantine map[types.NamespacedName]*quarantined
	// svcNode and svcNodeGen are the node-level inputs of the last sync and their generation
	// (inputs.go).
	svcNode    svcNodeInputs
	svcNodeGen uint64
	walk       resyncWalk
	// recomputeAll makes full resyncs recompute every Service, whatever changed (benchmarks
	// compare it with the default).
	recomputeAll bool
	// computeWorkers caps the goroutines a sync computes Services on (0: GOMAXPROCS); tests
	// compare spreads.
	computeWorkers int
	// onCompute, when set, is called for every Service a sync computes, on the sync goroutine
	// (tests).
	onCompute    func(types.NamespacedName)
	started      bool
	stale        []of.Op  // deletes of earlier rounds' flows, sent with the first bundle
	staleCurrent []of.Op  // deletes of flows already in this round, first in the first bundle
	staleGroups  []uint32 // group IDs earlier runs' flows use, deleted by the first bundle
	retry        *retryTimer
	// claims decides which Service owns each (family, address, protocol, port) (claims.go);
	claims *claimIndex
	// budget decides, before anything is built, which Services may have flows (budget.go).
	budget *flowBudget
	// syncCIDRs are this sync's ServiceCIDRs (of generation syncCIDRGen); exempt the
	// ClusterIPs of skipped Services, which pass the ServiceCIDR drop.
	syncCIDRs   []netip.Prefix
	syncCIDRGen uint64
	exempt      map[types.NamespacedName][]netip.Addr

	// mu guards everything below.
	mu      sync.Mutex
	node    *v1.Node
	nodeGen uint64 // bumped by every node update
	// peers are the other Nodes' InternalIPs, by Node name (pipeline.NodeConfig.PeerNodeIPs).
	peers     map[string][]netip.Addr
	baseDirty bool
	// serviceCIDRs are the ServiceCIDRs last set (SetServiceCIDRs), cidrGen their generation;
	// committedCIDRs those of the committed node-level flows (ServiceCIDRs).
	serviceCIDRs   []netip.Prefix
	cidrGen        uint64
	committedCIDRs []netip.Prefix
	// addrIssues are the addresses each committed Service asked for and does not get.
	addrIssues map[types.NamespacedName][]addrIssue
	// bridgeState is the bridge's reconciler: the installed state of the proxier's owners
	// (and of the other writers of the bridge), written only by the syncSem holder's batches.
	bridgeState *reconciler.Reconciler
	problems    map[types.NamespacedName]*ServiceProblem
	// earlyBase is set once InstallBaseFlows ran: the first bundle deletes what it installed.
	earlyBase bool
	// nodePortAddrs are the NodePort addresses of the committed base flows (NodePortAddresses).
	nodePortAddrs []netip.Addr
	// portsGen changes whenever a commit changes what Services() reports of the Service ports
	// themselves, or NodePortAddresses (PortsGeneration).
	portsGen uint64
	lastSync time.Time // when the last successful sync finished
	syncErr  error
	syncs    int
}

// New returns a Proxier that installs through bridge, in round opts.Round.
func New(opts Options, bridge Bridge) (*Proxier, error) {
	opts.defaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	p := &Proxier{
		opts:           opts,
		bridge:         bridge,
		round:          opts.Round,
		track:          tracker.New(),
		syncSem:        make(chan struct{}, 1),
		driftCheck:     make(chan struct{}, 1),
		svcs:           map[types.NamespacedName]*svcRecord{},
		dirty:          sets.New[types.NamespacedName](),
		groups:         newGroupIDs(),
		ownerEndpoints: map[owner]selected{},
		ownerMeta:      map[owner]ownerInfo{},
		quarantine:     map[types.NamespacedName]*quarantined{},
		baseDirty:      true,
		peers:          map[string][]netip.Addr{},
		problems:       map[types.NamespacedName]*ServiceProblem{},
		exempt:         map[types.NamespacedName][]netip.Addr{},
		addrIssues:     map[types.NamespacedName][]addrIssue{},
	}
	p.budget = newFlowBudget(opts.MaxFlowsPerService, opts.MaxFlows, recordEntries{p})
	p.claims = newClaimIndex(recordClaims{p})
	if err := p.useReconciler(opts.Reconciler, bridge); err != nil {
		return nil, err
	}
	p.runner = newRunner(p.syncOnce, opts.MinSyncInterval, opts.FullSyncPeriod, opts.Clock)
	p.retry = newRetryTimer(opts.Clock, p.runner.Request)
	return p, nil
}

// Tracker exposes the change trackers, so that tests and callers with their own informers can
// feed events.
func (p *Proxier) Tracker() *tracker.Tracker { return p.track }

// OnNodeUpdate records this node's latest object (its addresses serve NodePorts).
func (p *Proxier) OnNodeUpdate(node *v1.Node) {
	if node == nil || node.Name != p.opts.NodeName {
		return
	}
	p.mu.Lock()
	p.node = node.DeepCopy()
	p.nodeGen++
	p.baseDirty = true
	p.mu.Unlock()
	if o := p.opts.Observer; o != nil {
		o.NodeUpdated(node)
		o.QueuedUpdate()
	}
	p.runner.Request()
}

// OnPeerNode records another Node's InternalIPs (nil node: deleted); a change rebuilds the base
// flows (pipeline.NodeConfig.PeerNodeIPs).
func (p *Proxier) OnPeerNode(name string, node *v1.Node) {
	ips := nodeIPs(node, model.Families{IPv4: true, IPv6: true})
	p.mu.Lock()
	if slices.Equal(p.peers[name], ips) {
		p.mu.Unlock()
		return
	}
	if len(ips) == 0 {
		delete(p.peers, name)
	} else {
		p.peers[name] = ips
	}
	p.nodeGen++
	p.baseDirty = true
	p.mu.Unlock()
	p.runner.Request()
}

// Run starts informers on client, waits for their caches, then syncs until ctx is done.
func (p *Proxier) Run(ctx context.Context, client kubernetes.Interface) error {
	return p.RunWithInformers(ctx, informers.NewSharedInformerFactory(client, 0))
}

// RunWithInformers adds the proxier's handlers to factory's Service, EndpointSlice and Node
// informers (the binary's one shared factory), starts them, waits until its handlers have
// received every object of the initial lists, then syncs until ctx is done. Only this Node's
// events reach the proxier.
//
// An informer's own HasSynced is true once its initial list is in its cache, while its handlers
// may still be working through it: a first sync started then misses the late objects and
// computes their Services again right after (at 100,000 Services, about 70,000 of them). The
// handlers' registrations say when they are through.
func (p *Proxier) RunWithInformers(ctx context.Context, factory informers.SharedInformerFactory) error {
	svcInf := factory.Core().V1().Services().Informer()
	sliceInf := factory.Discovery().V1().EndpointSlices().Informer()
	svcReg, err := svcInf.AddEventHandler(p.track.ServiceHandler())
	if err != nil {
		return fmt.Errorf("adding Service handler: %w", err)
	}
	sliceReg, err := sliceInf.AddEventHandler(p.track.EndpointSliceHandler())
	if err != nil {
		return fmt.Errorf("adding EndpointSlice handler: %w", err)
	}
	nodeInf := factory.Core().V1().Nodes().Informer()
	nodeHandler := func(obj any) {
		n, ok := obj.(*v1.Node)
		switch {
		case ok && n.Name == p.opts.NodeName:
			p.OnNodeUpdate(n)
		case ok:
			p.OnPeerNode(n.Name, n)
		}
	}
	nodeReg, err := nodeInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    nodeHandler,
		UpdateFunc: func(_, n any) { nodeHandler(n) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if n, ok := obj.(*v1.Node); ok && n.Name != p.opts.NodeName {
				p.OnPeerNode(n.Name, nil)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("adding Node handler: %w", err)
	}
	factory.Start(ctx.Done())
	klog.InfoS("Waiting for Service, EndpointSlice and Node caches to sync")
	if !cache.WaitForCacheSync(ctx.Done(), svcReg.HasSynced, sliceReg.HasSynced, nodeReg.HasSynced) {
		return fmt.Errorf("caches did not sync: %w", ctx.Err())
	}
	klog.InfoS("Caches synced; starting the proxier")
	p.RunSyncLoop(ctx)
	return nil
}

// RunSyncLoop syncs until ctx is done. Call it only after the caches feeding the trackers have
// synced: nothing is programmed before that.
func (p *Proxier) RunSyncLoop(ctx context.Context) {
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-p.track.Notify():
				if o := p.opts.Observer; o != nil {
					o.QueuedUpdate()
				}
				p.runner.Request()
			}
		}
	}()
	p.runner.Run(ctx)
}

// SyncNow runs one sync immediately (full or incremental); for tests and start-up.
func (p *Proxier) SyncNow(ctx context.Context, full bool) error { return p.syncOnce(ctx, full) }
