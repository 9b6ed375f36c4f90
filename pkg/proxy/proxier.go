package proxy

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/model"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/tracker"
)

// RoundStore keeps the flow round number across agent restarts (in the bridge's external_ids).
type RoundStore interface {
	// LoadRound returns the last saved round, or ok=false when none was saved.
	LoadRound(ctx context.Context) (round uint16, ok bool, err error)
	// SaveRound records the round now installed.
	SaveRound(ctx context.Context, round uint16) error
}

// Proxier programs Services into OVS. Create it with New, feed it with informers (Run does that
// for a clientset) and it syncs on its own goroutine.
type Proxier struct {
	opts   Options
	bridge of.Bridge
	rounds RoundStore
	track  *tracker.Tracker
	runner *runner

	// mu guards everything below; the sync goroutine holds it while it syncs.
	mu        sync.Mutex
	node      *v1.Node
	baseDirty bool
	services  map[types.NamespacedName]*v1.Service
	dirty     sets.Set[types.NamespacedName]
	state     *flowState
	groups    *groupIDs
	svcOwners map[types.NamespacedName][]owner
	// ownerEndpoints are the endpoints each owner's groups selected at its last sync (UDP
	// conntrack clean-up).
	ownerEndpoints map[owner]selected
	status         map[types.NamespacedName]*serviceStatus
	round          uint16
	// lastFamilies are the families the installed state was computed for.
	lastFamilies model.Families
	started      bool
	// stale holds delete ops for flows of older rounds, sent with the first sync.
	stale []of.Op
	// lastSync is when the last successful sync finished.
	lastSync time.Time
	syncErr  error
	syncs    int
}

// New returns a Proxier that installs through bridge and keeps its round in rounds.
func New(opts Options, bridge of.Bridge, rounds RoundStore) (*Proxier, error) {
	opts.defaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	p := &Proxier{
		opts:           opts,
		bridge:         bridge,
		rounds:         rounds,
		track:          tracker.New(),
		baseDirty:      true,
		services:       map[types.NamespacedName]*v1.Service{},
		dirty:          sets.New[types.NamespacedName](),
		state:          newFlowState(),
		groups:         newGroupIDs(),
		svcOwners:      map[types.NamespacedName][]owner{},
		ownerEndpoints: map[owner]selected{},
		status:         map[types.NamespacedName]*serviceStatus{},
	}
	p.runner = newRunner(p.syncOnce, opts.MinSyncInterval, opts.FullSyncPeriod, opts.Clock)
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
	p.baseDirty = true
	p.mu.Unlock()
	if o := p.opts.Observer; o != nil {
		o.NodeUpdated(node)
		o.QueuedUpdate()
	}
	p.runner.Request()
}

// Run starts informers on client, waits for their caches, then syncs until ctx is done.
func (p *Proxier) Run(ctx context.Context, client kubernetes.Interface) error {
	factory := informers.NewSharedInformerFactory(client, 0)
	svcInf := factory.Core().V1().Services().Informer()
	sliceInf := factory.Discovery().V1().EndpointSlices().Informer()
	if _, err := svcInf.AddEventHandler(p.track.ServiceHandler()); err != nil {
		return fmt.Errorf("adding Service handler: %w", err)
	}
	if _, err := sliceInf.AddEventHandler(p.track.EndpointSliceHandler()); err != nil {
		return fmt.Errorf("adding EndpointSlice handler: %w", err)
	}
	nodeFactory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", p.opts.NodeName).String()
		}))
	nodeInf := nodeFactory.Core().V1().Nodes().Informer()
	nodeHandler := func(obj any) {
		if n, ok := obj.(*v1.Node); ok {
			p.OnNodeUpdate(n)
		}
	}
	if _, err := nodeInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    nodeHandler,
		UpdateFunc: func(_, n any) { nodeHandler(n) },
	}); err != nil {
		return fmt.Errorf("adding Node handler: %w", err)
	}
	factory.Start(ctx.Done())
	nodeFactory.Start(ctx.Done())
	klog.InfoS("Waiting for Service, EndpointSlice and Node caches to sync")
	if !cache.WaitForCacheSync(ctx.Done(), svcInf.HasSynced, sliceInf.HasSynced, nodeInf.HasSynced) {
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
