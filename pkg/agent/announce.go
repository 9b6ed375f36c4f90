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

	"github.com/antrea-proxy/antrea-proxy/pkg/lbapi"
	"github.com/antrea-proxy/antrea-proxy/pkg/nodenet"
)

// announceInterval bounds how long a change waits before the announcer applies it, and paces
// the repeated gratuitous announcements.
const announceInterval = 500 * time.Millisecond

// announcedIPs returns, sorted, the LoadBalancer IPs this node must answer ARP/NDP for: those
// antrea-controller assigned to node in a Service's antrea-proxy.io/announcing-node annotation
// and that the proxier programs (so the host routes them into OVS). Proxy-mode addresses are
// never in the annotation, nor programmed.
func announcedIPs(node string, services []*v1.Service, programmed []netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, svc := range services {
		v, ok := svc.Annotations[lbapi.AnnotationAnnouncingNode]
		if !ok || svc.Spec.Type != v1.ServiceTypeLoadBalancer {
			continue
		}
		as, err := lbapi.ParseAnnouncingNodes(v)
		if err != nil {
			klog.InfoS("Ignoring malformed entries of the announcing-node annotation", "service", klog.KObj(svc), "err", err)
		}
		for _, a := range as {
			if a.Node == node && slices.Contains(programmed, a.Addr) && !slices.Contains(out, a.Addr) {
				out = append(out, a.Addr)
			}
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
	ann := nodenet.NewAnnouncer(nodenet.HostAnnounceOps{Host: d.host}, 0)
	t := time.NewTicker(announceInterval)
	defer t.Stop()
	var lastErr string
	for {
		uplink := d.uplink(nodeInf.Lister().Get)
		svcs, _ := svcInf.Lister().List(labels.Everything())
		want := announcedIPs(d.cfg.NodeName, svcs, d.exposedIPs())
		if err := ann.Sync(uplink, want); err != nil {
			if err.Error() != lastErr {
				klog.ErrorS(err, "Announcing LoadBalancer IPs failed; retrying", "uplink", uplink)
			}
			lastErr = err.Error()
		} else {
			lastErr = ""
		}
		select {
		case <-ctx.Done():
			if err := ann.Withdraw(); err != nil {
				klog.ErrorS(err, "Withdrawing LoadBalancer IPs")
			}
			return nil
		case <-kick:
		case <-d.announceKick:
		case <-t.C:
		}
	}
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
