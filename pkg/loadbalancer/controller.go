package loadbalancer

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/antrea-proxy/antrea-proxy/pkg/lbapi"
	"github.com/antrea-proxy/antrea-proxy/pkg/loadbalancer/conditions"
	"github.com/antrea-proxy/antrea-proxy/pkg/loadbalancer/ipam"
)

// DefaultWorkers is the number of Services synced in parallel by default.
const DefaultWorkers = 4

// Options configures a Controller.
type Options struct {
	// Class is the spec.loadBalancerClass handled besides "no class".
	Class string
	// Pools are the address pools, in allocation order. None is valid:
	// every Service then reports that no pool is configured.
	Pools []*ipam.Pool
	// ReleaseGrace is how long the addresses of a deleted Service stay
	// reserved for a Service of the same namespace and name; 0 reserves
	// nothing.
	ReleaseGrace time.Duration
	// Recorder receives the Events emitted on Services. Required.
	Recorder record.EventRecorder
	// Clock stamps condition transitions and times announcer Leases; default the real clock.
	Clock clock.WithTicker
	// Workers is the number of parallel syncs; default DefaultWorkers.
	Workers int
	// Metrics receives the controller's metrics; default a new Metrics
	// that nobody serves.
	Metrics *Metrics
	// StallTimeout is how long one sync may run before Stalled reports
	// it; default DefaultStallTimeout.
	StallTimeout time.Duration
	// AnnouncerLeaseNamespace, when set, is where the agents renew their announcer Leases
	// (lbapi.AnnouncerLeaseName): a node announces VIP-mode addresses only while its Lease is
	// renewed, and loses them within the Lease's duration after it stops. "" makes the nodes'
	// Ready condition alone decide, as before announcer Leases.
	AnnouncerLeaseNamespace string
}

// Controller is the LoadBalancer IP provider. Create it with New before
// starting the informer factory, then call Run.
type Controller struct {
	client   kubernetes.Interface
	class    string
	alloc    *ipam.Allocator
	recorder record.EventRecorder
	clock    clock.PassiveClock
	workers  int
	services corelisters.ServiceLister
	// namespaces gives the labels that pools' namespaceSelectors match.
	namespaces corelisters.NamespaceLister
	picker     nodePicker
	synced     []cache.InformerSynced
	queue      workqueue.TypedRateLimitingInterface[types.NamespacedName]
	metrics    *Metrics
	// ready is set once the caches synced and the allocations are rebuilt.
	ready        atomic.Bool
	stallTimeout time.Duration

	mu sync.Mutex
	// inflight holds when each running sync started.
	inflight map[types.NamespacedName]time.Time
	// announcer is the node chosen for each VIP-mode address (shared
	// addresses have one node for all their Services).
	announcer map[netip.Addr]string
	// leases tracks the announcer Leases (nil without them); leaseInf is their informer.
	leases   *liveness
	leaseInf cache.SharedIndexInformer
}

// New builds a Controller on the informers of factory.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, opts Options) (*Controller, error) {
	if opts.Class == "" || opts.Recorder == nil {
		return nil, errors.New("loadbalancer: Options.Class and Options.Recorder are required")
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics()
	}
	if opts.StallTimeout <= 0 {
		opts.StallTimeout = DefaultStallTimeout
	}
	svcInf := factory.Core().V1().Services()
	nodeInf := factory.Core().V1().Nodes()
	sliceInf := factory.Discovery().V1().EndpointSlices()
	nsInf := factory.Core().V1().Namespaces()
	c := &Controller{
		client:     client,
		class:      opts.Class,
		alloc:      ipam.New(opts.Pools, ipam.Reservations{Clock: opts.Clock, Grace: opts.ReleaseGrace}),
		namespaces: nsInf.Lister(),
		recorder:   opts.Recorder,
		clock:      opts.Clock,
		workers:    opts.Workers,
		services:   svcInf.Lister(),
		picker:     nodePicker{nodes: nodeInf.Lister(), slices: sliceInf.Lister()},
		synced: []cache.InformerSynced{svcInf.Informer().HasSynced, nodeInf.Informer().HasSynced,
			sliceInf.Informer().HasSynced, nsInf.Informer().HasSynced},
		announcer: make(map[netip.Addr]string),
		inflight:  make(map[types.NamespacedName]time.Time),
		metrics:   opts.Metrics,

		stallTimeout: opts.StallTimeout,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName](),
			workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "loadbalancer"}),
	}
	if err := opts.Metrics.registry.Register(newStateCollector(c)); err != nil {
		return nil, fmt.Errorf("loadbalancer: registering metrics: %w", err)
	}
	_, err := svcInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onService,
		UpdateFunc: func(_, obj any) { c.onService(obj) },
		DeleteFunc: c.onService,
	})
	if err != nil {
		return nil, fmt.Errorf("loadbalancer: watching Services: %w", err)
	}
	if _, err = nodeInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.enqueueVIPServices() },
		UpdateFunc: c.onNodeUpdate,
		DeleteFunc: func(any) { c.enqueueVIPServices() },
	}); err != nil {
		return nil, fmt.Errorf("loadbalancer: watching Nodes: %w", err)
	}
	if _, err = sliceInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onEndpointSlice,
		UpdateFunc: func(_, obj any) { c.onEndpointSlice(obj) },
		DeleteFunc: c.onEndpointSlice,
	}); err != nil {
		return nil, fmt.Errorf("loadbalancer: watching EndpointSlices: %w", err)
	}
	if _, err = nsInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: c.onNamespaceUpdate,
	}); err != nil {
		return nil, fmt.Errorf("loadbalancer: watching Namespaces: %w", err)
	}
	if ns := opts.AnnouncerLeaseNamespace; ns != "" {
		c.leases = newLiveness(opts.Clock, c.enqueueVIPServices)
		c.leaseInf = newLeaseInformer(client, ns)
		if err := c.leases.watch(c.leaseInf); err != nil {
			return nil, fmt.Errorf("loadbalancer: watching announcer Leases: %w", err)
		}
		c.picker.live = c.leases.isAlive
		c.synced = append(c.synced, c.leaseInf.HasSynced)
	}
	return c, nil
}

// handles reports whether svc is a LoadBalancer Service of our class.
func (c *Controller) handles(svc *v1.Service) bool {
	return svc.Spec.Type == v1.ServiceTypeLoadBalancer &&
		(svc.Spec.LoadBalancerClass == nil || *svc.Spec.LoadBalancerClass == c.class)
}

func (c *Controller) onService(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	svc, ok := obj.(*v1.Service)
	if !ok {
		return
	}
	if c.handles(svc) || c.ours(svc) {
		c.queue.Add(types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name})
	}
}

func (c *Controller) onNodeUpdate(oldObj, newObj any) {
	o, ok1 := oldObj.(*v1.Node)
	n, ok2 := newObj.(*v1.Node)
	if ok1 && ok2 && nodeReady(o) == nodeReady(n) && labels.Equals(o.Labels, n.Labels) && draining(o) == draining(n) {
		return // heartbeats and other changes that do not affect eligibility
	}
	c.enqueueVIPServices()
}

// enqueueVIPServices queues every Service that holds a VIP-mode address,
// whose announcing node may have to change.
func (c *Controller) enqueueVIPServices() {
	svcs, err := c.services.List(labels.Everything())
	if err != nil {
		return
	}
	for _, svc := range svcs {
		key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
		for _, a := range c.alloc.Assigned(key) {
			if a.Pool.Mode == v1.LoadBalancerIPModeVIP {
				c.queue.Add(key)
				break
			}
		}
	}
}

func (c *Controller) onEndpointSlice(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	es, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	name := es.Labels[discoveryv1.LabelServiceName]
	if name == "" {
		return
	}
	svc, err := c.services.Services(es.Namespace).Get(name)
	if err != nil || !c.handles(svc) || svc.Spec.ExternalTrafficPolicy != v1.ServiceExternalTrafficPolicyLocal {
		return
	}
	c.queue.Add(types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name})
}

// Run waits for the informer caches (the caller starts the factory),
// rebuilds the allocations from the Services it owns, then syncs Services
// until ctx is done.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	if c.leaseInf != nil {
		go c.leaseInf.Run(ctx.Done())
	}
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("loadbalancer: informer caches did not sync: %w", ctx.Err())
	}
	if err := c.restore(); err != nil {
		return err
	}
	c.ready.Store(true)
	defer c.ready.Store(false)
	if c.leases != nil {
		go c.leases.run(ctx)
	}
	klog.InfoS("LoadBalancer controller started", "class", c.class, "pools", len(c.alloc.Pools()),
		"restoredAddresses", c.alloc.InUse(), "workers", c.workers)
	var wg sync.WaitGroup
	for range c.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wait.UntilWithContext(ctx, c.worker, time.Second)
		}()
	}
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
	return nil
}

// restore rebuilds the allocator from the status of the Services that
// carry our finalizer, oldest first, then adopts the in-pool ingress
// addresses of the other Services we handle, and queues every Service.
func (c *Controller) restore() error {
	svcs, err := c.services.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("loadbalancer: listing Services: %w", err)
	}
	slices.SortFunc(svcs, func(a, b *v1.Service) int {
		if d := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); d != 0 {
			return d
		}
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	var adoptable []*v1.Service
	for _, svc := range svcs {
		key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
		if !ownsFinalizer(svc, c.class) {
			if c.handles(svc) {
				c.queue.Add(key)
				adoptable = append(adoptable, svc)
			}
			continue
		}
		c.queue.Add(key)
		if !c.handles(svc) || svc.DeletionTimestamp != nil {
			continue // released by its next sync
		}
		req, _ := c.request(svc)
		for _, p := range c.alloc.Restore(key, ingressAddrs(svc), req.ShareKey, req.Ports) {
			klog.InfoS("Not restoring LoadBalancer address", "service", key, "reason", p.Message)
		}
		anns, _ := lbapi.ParseAnnouncingNodes(svc.Annotations[lbapi.AnnotationAnnouncingNode])
		c.mu.Lock()
		for _, a := range anns {
			if _, taken := c.announcer[a.Addr]; !taken {
				c.announcer[a.Addr] = a.Node
			}
		}
		c.mu.Unlock()
	}
	// Then Services whose status another party (or a controller that
	// had not yet added the finalizer) set: after ours, so ours win.
	for _, svc := range adoptable {
		if svc.DeletionTimestamp == nil {
			req, _ := c.request(svc)
			c.adopt(req.Owner, svc, req)
		}
	}
	c.restoreWaiting(svcs)
	return nil
}

// restoreWaiting gives the Services that were waiting for an address
// before the restart (Serving=False, reason Infrastructure) their place
// back: oldest waiting first, by the condition's transition time.
func (c *Controller) restoreWaiting(svcs []*v1.Service) {
	type waiting struct {
		svc   *v1.Service
		since time.Time
	}
	var ws []waiting
	for _, svc := range svcs {
		if !c.handles(svc) || svc.DeletionTimestamp != nil {
			continue
		}
		cond := meta.FindStatusCondition(svc.Status.Conditions, conditions.TypeServing)
		if cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == conditions.ReasonInfrastructure {
			ws = append(ws, waiting{svc, cond.LastTransitionTime.Time})
		}
	}
	slices.SortStableFunc(ws, func(a, b waiting) int { return a.since.Compare(b.since) })
	for _, w := range ws {
		if req, bad := c.request(w.svc); len(bad) == 0 {
			c.alloc.Wait(req)
		}
	}
}

func (c *Controller) worker(ctx context.Context) {
	for c.processNext(ctx) {
	}
}

func (c *Controller) processNext(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	start := time.Now()
	c.syncStarted(key)
	err := c.sync(ctx, key)
	c.syncEnded(key)
	c.metrics.synced(time.Since(start), err)
	if err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Syncing LoadBalancer Service failed; will retry", "service", key)
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

// onNamespaceUpdate queues the Services of a namespace whose labels
// changed: pools' namespaceSelectors may now admit or refuse them.
func (c *Controller) onNamespaceUpdate(oldObj, newObj any) {
	o, ok1 := oldObj.(*v1.Namespace)
	n, ok2 := newObj.(*v1.Namespace)
	if !ok1 || !ok2 || labels.Equals(o.Labels, n.Labels) {
		return
	}
	svcs, err := c.services.Services(n.Name).List(labels.Everything())
	if err != nil {
		return
	}
	for _, svc := range svcs {
		if c.handles(svc) {
			c.queue.Add(types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name})
		}
	}
}
