//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// ProxyLB is the cluster's external L4 load balancer for a Proxy-mode pool, what a cloud's
// proxy load balancer and its controller are to a cloud cluster: it follows the Services whose
// ingress addresses the pool holds with ipMode Proxy and serves every port of them, relaying
// each admitted connection (TCP) or flow (UDP) to an eligible node's NodePort: every Ready node
// for externalTrafficPolicy: Cluster, the nodes whose healthCheckNodePort answers 200 for Local.
// It honours loadBalancerSourceRanges and ClientIP session affinity, and a Service without
// NodePorts is relayed to its ready endpoints. Its sockets live in the switch namespace, which
// owns the whole pool, so a pool address nothing serves refuses connections.
type ProxyLB struct {
	pool   netip.Prefix
	ops    netOps
	probe  func(ctx context.Context, k healthKey) bool
	logf   func(format string, args ...any)
	kick   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}

	svcs   cacheLister[*corev1.Service]
	nodes  cacheLister[*corev1.Node]
	slices cacheLister[*discoveryv1.EndpointSlice]

	// Owned by the run goroutine.
	frontends map[frontendKey]*frontend
	healthy   map[healthKey]bool
}

// cacheLister lists one kind of object from an informer's store.
type cacheLister[T any] interface {
	List(selector labels.Selector) ([]T, error)
}

// healthInterval is how often the load balancer reconciles and checks node health.
const healthInterval = time.Second

// StartProxyLB starts the load balancer for pool: informers on client, sockets by ops, health
// checks through ops too. logf receives every change of a frontend.
func StartProxyLB(client kubernetes.Interface, pool netip.Prefix, ops netOps, logf func(string, ...any)) (*ProxyLB, error) {
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactory(client, 0)
	lb := &ProxyLB{
		pool: pool, ops: ops, logf: logf, kick: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{}),
		svcs:      factory.Core().V1().Services().Lister(),
		nodes:     factory.Core().V1().Nodes().Lister(),
		slices:    factory.Discovery().V1().EndpointSlices().Lister(),
		frontends: map[frontendKey]*frontend{},
		healthy:   map[healthKey]bool{},
	}
	lb.probe = httpProbe(ops)
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { lb.trigger() },
		UpdateFunc: func(any, any) { lb.trigger() },
		DeleteFunc: func(any) { lb.trigger() },
	}
	for _, inf := range []cache.SharedIndexInformer{
		factory.Core().V1().Services().Informer(), factory.Core().V1().Nodes().Informer(),
		factory.Discovery().V1().EndpointSlices().Informer(),
	} {
		if _, err := inf.AddEventHandler(handler); err != nil {
			cancel()
			return nil, err
		}
	}
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			cancel()
			return nil, fmt.Errorf("proxy load balancer: the %v informer did not sync", typ)
		}
	}
	go lb.run(ctx)
	return lb, nil
}

func (lb *ProxyLB) trigger() {
	select {
	case lb.kick <- struct{}{}:
	default:
	}
}

// Stop ends the load balancer and closes every frontend.
func (lb *ProxyLB) Stop() {
	lb.cancel()
	<-lb.done
}

// run reconciles on every change of the objects and every healthInterval (health checks).
func (lb *ProxyLB) run(ctx context.Context) {
	defer close(lb.done)
	tick := time.NewTicker(healthInterval)
	defer tick.Stop()
	for {
		lb.reconcile(ctx)
		select {
		case <-ctx.Done():
			for k, f := range lb.frontends {
				f.close()
				delete(lb.frontends, k)
			}
			return
		case <-lb.kick:
		case <-tick.C:
		}
	}
}

// reconcile checks health, then opens, updates and closes frontends to match the objects.
func (lb *ProxyLB) reconcile(ctx context.Context) {
	in := lbInputs{Pool: lb.pool}
	var err error
	if in.Services, err = lb.svcs.List(labels.Everything()); err != nil {
		lb.logf("listing Services: %v", err)
		return
	}
	if in.Nodes, err = lb.nodes.List(labels.Everything()); err != nil {
		lb.logf("listing Nodes: %v", err)
		return
	}
	if in.Slices, err = lb.slices.List(labels.Everything()); err != nil {
		lb.logf("listing EndpointSlices: %v", err)
		return
	}
	in.Healthy = lb.checkHealth(ctx, healthChecks(in))
	want := desiredFrontends(in)
	for k, f := range lb.frontends {
		if _, ok := want[k]; !ok {
			f.close()
			delete(lb.frontends, k)
			lb.logf("%s: removed", k)
		}
	}
	for k, cfg := range want {
		f, ok := lb.frontends[k]
		switch {
		case !ok:
			f, err := startFrontend(lb.ops, k, cfg, lb.logf)
			if err != nil {
				lb.logf("%s: %s: %v", k, cfg.Service, err)
				continue
			}
			lb.frontends[k] = f
			lb.logf("%s: %s: targets %v, affinity %v, source ranges %v", k, cfg.Service, cfg.Targets, cfg.Affinity, cfg.SourceRanges)
		case !f.cfg.Load().equal(cfg):
			f.update(cfg)
			lb.logf("%s: %s: targets %v, affinity %v, source ranges %v", k, cfg.Service, cfg.Targets, cfg.Affinity, cfg.SourceRanges)
		}
	}
}

// checkHealth runs the checks concurrently and logs every change of a node's health.
func (lb *ProxyLB) checkHealth(ctx context.Context, checks []healthKey) map[healthKey]bool {
	out := make(map[healthKey]bool, len(checks))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, k := range checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok := lb.probe(ctx, k)
			mu.Lock()
			out[k] = ok
			mu.Unlock()
		}()
	}
	wg.Wait()
	for k, ok := range out {
		if prev, seen := lb.healthy[k]; !seen || prev != ok {
			lb.logf("health %s:%d: %v", k.Node, k.Port, ok)
		}
	}
	lb.healthy = out
	return out
}

// httpProbe is a cloud load balancer's health check of a healthCheckNodePort: GET /healthz,
// healthy on 200, within one healthInterval.
func httpProbe(ops netOps) func(ctx context.Context, k healthKey) bool {
	client := &http.Client{
		Timeout: healthInterval,
		Transport: &http.Transport{
			DialContext:       ops.Dial,
			DisableKeepAlives: true,
		},
	}
	return func(ctx context.Context, k healthKey) bool {
		url := "http://" + netip.AddrPortFrom(k.Node, uint16(k.Port)).String() + "/healthz"
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false
		}
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
}

// nsOps opens sockets inside a network namespace.
type nsOps struct{ ns *framework.NetNS }

func (o nsOps) Listen(network, addr string) (net.Listener, error) { return o.ns.Listen(network, addr) }

func (o nsOps) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	return o.ns.Dial(ctx, network, addr)
}

func (o nsOps) ListenPacket(network, addr string) (net.PacketConn, error) {
	var pc net.PacketConn
	err := o.ns.Do(func() error {
		var err error
		pc, err = net.ListenPacket(network, addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listening on %s %s in netns %s: %w", network, addr, o.ns.Name, err)
	}
	return pc, nil
}
