package agent

import (
	"context"
	"net/netip"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/antrea-proxy/antrea-proxy/pkg/lbapi"
	"github.com/antrea-proxy/antrea-proxy/pkg/nodenet"
)

// announceInterval paces the announcer while it wants or holds addresses (or its last pass
// failed): it re-asserts them, retries and repeats the gratuitous announcements. A change of the
// Services, Nodes or the proxier's exposure wakes it at once; with nothing to announce it waits
// for one.
const announceInterval = 500 * time.Millisecond

// uplinkRefresh is how long the announcer keeps the uplink it looked up when no Service or Node
// changed and the last pass succeeded: a pass looks it up again after a change, after a failed
// pass, and at least this often while passes run (an address moved to another interface is
// followed within it by a node that announces addresses; an idle one runs no pass, and the
// uplink does not matter to it).
const uplinkRefresh = 10 * time.Second

// lbServed describes the LoadBalancer Services antrea-controller serves, whose addresses this
// node may announce: those of class Class, and those without a class when Classless.
type lbServed struct {
	Class     string
	Classless bool
}

// served reports whether svc is a LoadBalancer Service antrea-controller serves.
func (s lbServed) served(svc *v1.Service) bool {
	if svc.Spec.Type != v1.ServiceTypeLoadBalancer {
		return false
	}
	if c := svc.Spec.LoadBalancerClass; c != nil {
		return *c == s.Class
	}
	return s.Classless
}

// vipIngressIPs returns the addresses of svc's status ingress whose ipMode is VIP or unset
// (KEP-1860): those antrea-controller allocated from a VIP pool. Proxy-mode addresses belong to
// an external proxy, which answers for them itself.
func vipIngressIPs(svc *v1.Service) []netip.Addr {
	var out []netip.Addr
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		if ing.IPMode != nil && *ing.IPMode != v1.LoadBalancerIPModeVIP {
			continue
		}
		if a, err := netip.ParseAddr(ing.IP); err == nil && a.Zone() == "" {
			out = append(out, a.Unmap())
		}
	}
	return out
}

// announcedIPs returns, sorted, the LoadBalancer IPs this node must answer ARP/NDP for. An
// address is announced only when all of these hold for one Service:
//   - the Service is of type LoadBalancer and served by antrea-controller (its class, or no
//     class when the controller serves class-less Services);
//   - the address is in its status.loadBalancer.ingress with ipMode VIP or unset: antrea-controller
//     allocated it from a VIP pool (status is written through services/status, which users who
//     can create Services usually cannot);
//   - its antrea-proxy.io/announcing-node annotation assigns the address to node;
//   - the proxier programs the address (so the host sends its Service ports into OVS; the
//     node data path routes an announced address into OVS, DataPath.setAnnounced).
//
// The annotation alone never makes an address announced, nor do spec.externalIPs (even equal
// to an ingress IP of another Service): anyone who can create a Service could otherwise make
// the node claim, by gratuitous ARP, an address such as the subnet's router.
func announcedIPs(node string, scope lbServed, services []*v1.Service, programmed []netip.Addr) []netip.Addr {
	return keepProgrammed(assignedIPs(node, scope, services), programmed)
}

// keepProgrammed returns the addresses of assigned that programmed holds.
func keepProgrammed(assigned, programmed []netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, a := range assigned {
		if slices.Contains(programmed, a) {
			out = append(out, a)
		}
	}
	return out
}

// assignedIPs returns, sorted, the addresses antrea-controller assigned to node: the first
// three conditions of announcedIPs, whether the proxier programs them yet or not. A node with
// an assigned address is busy for its announcer Lease (AnnouncerLease.SetBusy).
func assignedIPs(node string, scope lbServed, services []*v1.Service) []netip.Addr {
	var out []netip.Addr
	for _, svc := range services {
		v, ok := svc.Annotations[lbapi.AnnotationAnnouncingNode]
		if !ok || !scope.served(svc) {
			continue
		}
		as, err := lbapi.ParseAnnouncingNodes(v)
		if err != nil {
			klog.InfoS("Ignoring malformed entries of the announcing-node annotation", "service", klog.KObj(svc), "err", err)
		}
		allocated := vipIngressIPs(svc)
		for _, a := range as {
			if a.Node != node || slices.Contains(out, a.Addr) {
				continue
			}
			if !slices.Contains(allocated, a.Addr) {
				klog.V(4).InfoS("Not announcing an address the announcing-node annotation names outside the Service's VIP ingress",
					"service", klog.KObj(svc), "ip", a.Addr)
				continue
			}
			out = append(out, a.Addr)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// runAnnouncer keeps the host answering ARP/NDP, on the uplink holding this Node's InternalIP,
// for the VIP-mode LoadBalancer IPs antrea-controller assigned to this node, until ctx is done;
// then it withdraws them.
func (d *DataPath) runAnnouncer(ctx context.Context, factory informers.SharedInformerFactory) error {
	svcInf, nodeInf := factory.Core().V1().Services(), factory.Core().V1().Nodes()
	kick := make(chan struct{}, 1)
	onEvent := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	h := cache.ResourceEventHandlerFuncs{AddFunc: func(any) { onEvent() }, UpdateFunc: func(any, any) { onEvent() }, DeleteFunc: func(any) { onEvent() }}
	for _, inf := range []cache.SharedIndexInformer{svcInf.Informer(), nodeInf.Informer()} {
		if _, err := inf.AddEventHandler(h); err != nil {
			return err
		}
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), svcInf.Informer().HasSynced, nodeInf.Informer().HasSynced) {
		return nil
	}
	ann := nodenet.NewAnnouncer(nodenet.HostAnnounceOps{Host: d.host}, 0).RefreshEvery(d.cfg.Announcer.Gratuitous(), time.Now)
	if d.lease != nil {
		go d.lease.Run(ctx)
	}
	t := time.NewTicker(announceInterval)
	defer t.Stop()
	var lastErr string
	// want is recomputed only when a Service, a Node or the proxier's exposure changed (each
	// kicks the loop); the other ticks re-assert it and send the repeated announcements, without
	// walking every Service.
	var want []netip.Addr
	recompute := true
	var up uplinkCache
	for {
		uplink := up.get(recompute || lastErr != "", time.Now(), func() string { return d.uplink(nodeInf.Lister().Get) })
		if recompute {
			svcs, _ := svcInf.Lister().List(labels.Everything())
			assigned := assignedIPs(d.cfg.NodeName, d.lbServed(), svcs)
			if d.lease != nil {
				d.lease.SetBusy(len(assigned) > 0)
			}
			want = keepProgrammed(assigned, d.exposedIPs())
			recompute = false
		}
		announce := want
		if d.lease != nil && !d.lease.Valid() {
			announce = nil // the controller moves this node's addresses: stop claiming them
		}
		err := ann.Sync(uplink, announce)
		// Linux answers ARP for a proxied address only when its route leaves through another
		// interface: the reconciler routes the announced addresses into OVS.
		d.setAnnounced(ann.Announced())
		if err != nil {
			if err.Error() != lastErr {
				klog.ErrorS(err, "Announcing LoadBalancer IPs failed; retrying", "uplink", uplink)
			}
			lastErr = err.Error()
		} else {
			lastErr = ""
		}
		// A node that announces nothing, and had nothing to withdraw, waits for a change: the
		// ticks only re-assert and repeat announcements (an idle agent woke twice a second).
		tick := t.C
		if announcerIdle(want, ann.Announced(), lastErr) {
			tick = nil
		}
		select {
		case <-ctx.Done():
			d.handOver(len(ann.Announced()) > 0)
			if err := ann.Withdraw(); err != nil {
				klog.ErrorS(err, "Withdrawing LoadBalancer IPs")
			}
			return nil
		case <-kick:
			recompute = true
		case <-d.announceKick:
			recompute = true
		case <-tick:
		}
	}
}

// announcerIdle reports whether the announcer has nothing to do until a Service, a Node or the
// proxier's exposure changes: it wants no address, holds none and its last pass succeeded.
func announcerIdle(want, announced []netip.Addr, lastErr string) bool {
	return len(want) == 0 && len(announced) == 0 && lastErr == ""
}

// uplinkCache keeps the announcer's uplink between passes (uplinkRefresh).
type uplinkCache struct {
	name string
	at   time.Time // when name was looked up; zero: never
}

// get returns the cached uplink, looked up again first when force is set or it is older than
// uplinkRefresh.
func (c *uplinkCache) get(force bool, now time.Time, lookup func() string) string {
	if force || c.at.IsZero() || now.Sub(c.at) >= uplinkRefresh {
		c.name, c.at = lookup(), now
	}
	return c.name
}

// handOver releases the announcer Lease and, when this node announces addresses, keeps
// answering for them until the controller moved them (at most the handover timeout).
func (d *DataPath) handOver(announcing bool) {
	if d.lease == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), d.lease.duration)
	err := d.lease.Release(ctx)
	cancel()
	if err != nil {
		klog.ErrorS(err, "Releasing the announcer Lease failed; the controller moves this node's addresses when it expires")
	}
	if !announcing || d.handoverTimeout <= 0 || d.handoverSvcs == nil {
		return
	}
	took, done := HandOver(d.handoverSvcs, d.cfg.NodeName, d.handoverTimeout, clock.RealClock{})
	klog.InfoS("Handed LoadBalancer IPs over before withdrawing them", "waited", took, "allMoved", done)
}

// lbServed returns the Services antrea-controller serves: those of antreaProxy.loadBalancerClass,
// and those without a class, which the controller always serves (loadbalancer.Controller.handles).
func (d *DataPath) lbServed() lbServed {
	return lbServed{Class: d.cfg.AntreaProxy.LoadBalancerClass, Classless: true}
}

// uplink returns the host interface holding one of this Node's InternalIPs, "" if none.
func (d *DataPath) uplink(get func(string) (*v1.Node, error)) string {
	n, err := get(d.cfg.NodeName)
	if err != nil {
		return ""
	}
	for _, ip := range nodeInfo(n).InternalIPs {
		if dev, err := d.host.UplinkOf(ip); err == nil {
			return dev
		}
	}
	return ""
}
