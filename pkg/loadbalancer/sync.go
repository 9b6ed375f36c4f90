package loadbalancer

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/lbapi"
	"github.com/antrea-proxy/antrea-proxy/pkg/loadbalancer/conditions"
	"github.com/antrea-proxy/antrea-proxy/pkg/loadbalancer/ipam"
)

// Event reasons emitted on Services.
const (
	EventAllocated        = "IPAllocated"
	EventReleased         = "IPReleased"
	EventAllocationFailed = "AllocationFailed"
	EventNodeAssigned     = "AnnouncingNodeAssigned"
)

// sync brings one Service in line. Writes carry the resourceVersion they
// were computed from; on a conflict the Service is read again from the
// API server and the whole sync is redone.
func (c *Controller) sync(ctx context.Context, key types.NamespacedName) error {
	svc, err := c.services.Services(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		c.releaseDeleted(key)
		return nil
	}
	if err != nil {
		return err
	}
	attempt := 0
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if attempt++; attempt > 1 {
			fresh, err := c.client.CoreV1().Services(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				c.releaseDeleted(key)
				return nil
			}
			if err != nil {
				return err
			}
			svc = fresh
		}
		if !c.handles(svc) || svc.DeletionTimestamp != nil {
			return c.cleanup(ctx, svc)
		}
		return c.reconcile(ctx, svc)
	})
	if err != nil {
		return fmt.Errorf("syncing Service %s: %w", key, err)
	}
	return nil
}

// cleanup clears, if the Service carries our finalizer, the status we
// wrote and removes the finalizer and the announcing-node annotation, then
// releases the Service's addresses. The release comes only after those
// writes succeeded: while the Service may still publish an address, no
// other Service can get it. Services without the finalizer are never
// written.
func (c *Controller) cleanup(ctx context.Context, svc *v1.Service) error {
	key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	// Retiring keeps the addresses blocked (and ends a wait) while the
	// writes below may fail.
	_, waiting := c.alloc.Retire(key)
	c.afterRelease(key, nil, waiting)
	if c.ours(svc) {
		if err := unpublish(ctx, c.client, svc); err != nil {
			return err
		}
	}
	release := c.alloc.Release
	if svc.DeletionTimestamp != nil {
		release = c.alloc.ReleaseDeleted // kept for its namespace/name a while
	}
	released, wake := release(key)
	c.afterRelease(key, released, wake)
	c.countReleased(released)
	if len(released) > 0 {
		c.recorder.Eventf(svc, v1.EventTypeNormal, EventReleased, "Released %s", joinAddrs(released))
		klog.InfoS("Released LoadBalancer addresses", "service", key, "addresses", released)
	}
	return nil
}

// releaseDeleted frees the addresses of a Service that no longer exists;
// they stay reserved for its namespace/name for the grace period.
func (c *Controller) releaseDeleted(key types.NamespacedName) {
	released, wake := c.alloc.ReleaseDeleted(key)
	c.afterRelease(key, released, wake)
	c.countReleased(released)
}

// reconcile allocates for a Service we handle and writes finalizer,
// announcing nodes and status.
func (c *Controller) reconcile(ctx context.Context, svc *v1.Service) error {
	key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	req, bad := c.request(svc)
	var res ipam.Result
	if len(bad) > 0 {
		res.Retiring, res.Wake = c.alloc.Retire(key)
	} else {
		c.adopt(key, svc, req)
		res = c.alloc.Ensure(req)
	}
	ev := evaluate(svc, res, bad)
	if ev.refused() && len(res.Assigned) > 0 {
		// A refused Service holds nothing; what it held retires like the
		// rest, until the status write below stops publishing it.
		retired, wake := c.alloc.Retire(key)
		res.Retiring = append(res.Retiring, retired...)
		res.Wake = append(res.Wake, wake...)
		res.Assigned = nil
	} else if ev.refused() {
		_, wake := c.alloc.Retire(key) // ends a wait
		res.Wake = append(res.Wake, wake...)
	}
	c.afterRelease(key, nil, res.Wake)
	if !res.RetryAt.IsZero() && !ev.refused() {
		// A deleted Service's reservation kept an address from it: retry
		// when the reservation ends.
		c.queue.AddAfter(key, res.RetryAt.Sub(c.clock.Now()))
	}
	if len(res.Added) > 0 && !ev.refused() {
		c.metrics.allocated(res.Added)
		c.recorder.Eventf(svc, v1.EventTypeNormal, EventAllocated, "Allocated %s", describeAssignments(res.Added))
		klog.InfoS("Allocated LoadBalancer addresses", "service", key, "addresses", describeAssignments(res.Added))
	}

	anns, pending, err := c.announce(svc, res.Assigned)
	if err != nil {
		return err
	}
	verdict := conditions.Verdict{
		Generation:     svc.Generation,
		Unsupported:    ev.unsupported,
		Infrastructure: ev.infrastructure,
		Degraded:       ev.degraded,
		Pending:        pending,
	}
	for _, a := range res.Assigned {
		switch i := slices.IndexFunc(anns, func(x lbapi.Announcement) bool { return x.Addr == a.Addr }); {
		case a.Pool.Mode == v1.LoadBalancerIPModeProxy:
			verdict.Ready = append(verdict.Ready, fmt.Sprintf("%s (Proxy)", a.Addr))
		case i >= 0:
			verdict.Ready = append(verdict.Ready, fmt.Sprintf("%s (VIP, announced by %s)", a.Addr, anns[i].Node))
		}
	}

	if svc, err = c.writeMetadata(ctx, svc, anns); err != nil {
		return err
	}
	written, err := c.writeStatus(ctx, svc, res.Assigned, verdict)
	if err != nil {
		return err
	}
	return c.finishRetiring(ctx, svc, written, res.Added)
}

// finishRetiring frees the addresses the Service dropped, now that the
// status as written (or found already right) no longer publishes them.
// Addresses this sync added and dropped again (a refused Service) were
// never published and get no Event.
func (c *Controller) finishRetiring(ctx context.Context, svc, written *v1.Service, added []ipam.Assignment) error {
	key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	retiring := c.alloc.Retiring(key)
	if len(retiring) == 0 {
		return nil
	}
	if err := c.confirmUnpublished(ctx, svc, written, retiring); err != nil {
		return err
	}
	dropped, wake := c.alloc.Unpublished(key)
	c.afterRelease(key, dropped, wake)
	published := slices.DeleteFunc(dropped, func(a netip.Addr) bool {
		return slices.ContainsFunc(added, func(x ipam.Assignment) bool { return x.Addr == a })
	})
	c.countReleased(published)
	if len(published) > 0 {
		c.recorder.Eventf(svc, v1.EventTypeNormal, EventReleased, "Released %s", joinAddrs(published))
		klog.InfoS("Released LoadBalancer addresses", "service", key, "addresses", published)
	}
	return nil
}

// confirmUnpublished makes sure the stored Service publishes none of
// addrs. written is what writeStatus stored; when nothing needed writing
// (written is nil), svc is the informer's copy, which may lag behind our
// own earlier write, so the API server is asked. A Service still
// publishing one of them is a conflict, which redoes the sync on a fresh
// copy.
func (c *Controller) confirmUnpublished(ctx context.Context, svc, written *v1.Service, addrs []netip.Addr) error {
	publishes := func(s *v1.Service) bool {
		return slices.ContainsFunc(ingressAddrs(s), func(a netip.Addr) bool { return slices.Contains(addrs, a) })
	}
	stillPublished := apierrors.NewConflict(v1.Resource("services"), svc.Name,
		errors.New("the status still publishes an address the Service dropped"))
	if written != nil {
		if publishes(written) {
			return stillPublished
		}
		return nil
	}
	stored, err := c.client.CoreV1().Services(svc.Namespace).Get(ctx, svc.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if publishes(stored) {
		return stillPublished
	}
	return nil
}

// adopt makes a Service that holds no address take the ingress addresses
// already in its status (set by us before a restart, or by another
// provider) where they lie in a pool and are free; Ensure then keeps those
// that fit the request rather than replacing them.
func (c *Controller) adopt(key types.NamespacedName, svc *v1.Service, req ipam.Request) {
	addrs := ingressAddrs(svc)
	if len(addrs) == 0 || len(c.alloc.Assigned(key)) > 0 {
		return
	}
	for _, p := range c.alloc.Restore(key, addrs, req.ShareKey, req.Ports) {
		klog.V(2).InfoS("Not adopting LoadBalancer address", "service", key, "reason", p.Message)
	}
}

// writeMetadata makes sure the Service has our finalizer and the
// announcing-node annotation for anns, and returns the Service as stored.
func (c *Controller) writeMetadata(ctx context.Context, svc *v1.Service, anns []lbapi.Announcement) (*v1.Service, error) {
	value := lbapi.FormatAnnouncingNodes(anns)
	cur, has := svc.Annotations[lbapi.AnnotationAnnouncingNode]
	if finalizerUpToDate(svc.Finalizers) && cur == value && has == (value != "") {
		return svc, nil
	}
	upd := svc.DeepCopy()
	upd.Finalizers = withFinalizer(upd.Finalizers)
	if value == "" {
		delete(upd.Annotations, lbapi.AnnotationAnnouncingNode)
	} else {
		if upd.Annotations == nil {
			upd.Annotations = map[string]string{}
		}
		upd.Annotations[lbapi.AnnotationAnnouncingNode] = value
	}
	return c.client.CoreV1().Services(svc.Namespace).Update(ctx, upd, metav1.UpdateOptions{})
}

// writeStatus writes ingress and conditions when they differ from the
// stored status, and emits a warning Event when serving fails anew.
// It returns the Service as stored after its write, or nil when nothing
// needed writing.
func (c *Controller) writeStatus(ctx context.Context, svc *v1.Service, as []ipam.Assignment, v conditions.Verdict) (*v1.Service, error) {
	st := svc.Status.DeepCopy()
	var before metav1.Condition
	if old := meta.FindStatusCondition(st.Conditions, conditions.TypeServing); old != nil {
		before = *old
	}
	st.LoadBalancer.Ingress = ingress(svc, as)
	changed := conditions.Apply(&st.Conditions, v, metav1.NewTime(c.clock.Now()))
	if !changed && apiequality.Semantic.DeepEqual(svc.Status.LoadBalancer, st.LoadBalancer) {
		return nil, nil
	}
	upd := svc.DeepCopy()
	upd.Status = *st
	out, err := c.client.CoreV1().Services(svc.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{})
	if err != nil {
		return nil, err
	}
	after := meta.FindStatusCondition(out.Status.Conditions, conditions.TypeServing)
	if after != nil && after.Status == metav1.ConditionFalse && (after.Reason != before.Reason || after.Message != before.Message) &&
		(after.Reason == conditions.ReasonUnsupported || after.Reason == conditions.ReasonInfrastructure) {
		c.recorder.Eventf(out, v1.EventTypeWarning, EventAllocationFailed, "%s: %s", after.Reason, after.Message)
	}
	return out, nil
}

// announce picks the announcing node of each VIP-mode address. It returns
// the announcements, and a pending message for each address without an
// eligible node.
func (c *Controller) announce(svc *v1.Service, as []ipam.Assignment) ([]lbapi.Announcement, []string, error) {
	key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	var anns []lbapi.Announcement
	var pending []string
	for _, a := range as {
		if a.Pool.Mode != v1.LoadBalancerIPModeVIP {
			continue
		}
		holders := c.alloc.Holders(a.Addr)
		sharers := []*v1.Service{svc}
		for _, h := range holders {
			if h == key {
				continue
			}
			if other, err := c.services.Services(h.Namespace).Get(h.Name); err == nil {
				sharers = append(sharers, other)
			}
		}
		eligible, err := c.picker.eligible(a.Pool, sharers)
		if err != nil {
			return nil, nil, fmt.Errorf("choosing the node announcing %s: %w", a.Addr, err)
		}
		c.mu.Lock()
		current := c.announcer[a.Addr]
		node := choose(a.Addr, eligible, current)
		if node == "" {
			delete(c.announcer, a.Addr)
		} else {
			c.announcer[a.Addr] = node
		}
		c.mu.Unlock()
		if node != current {
			for _, h := range holders {
				if h != key {
					c.queue.Add(h)
				}
			}
			if node != "" {
				msg := fmt.Sprintf("%s is announced by node %s", a.Addr, node)
				if current != "" {
					msg += fmt.Sprintf(" (was %s)", current)
				}
				c.recorder.Event(svc, v1.EventTypeNormal, EventNodeAssigned, msg)
			}
		}
		if node == "" {
			pending = append(pending, pendingMessage(a, sharers))
			continue
		}
		anns = append(anns, lbapi.Announcement{Addr: a.Addr, Node: node})
	}
	return anns, pending, nil
}

func pendingMessage(a ipam.Assignment, sharers []*v1.Service) string {
	msg := "waiting for a Ready node"
	if !a.Pool.NodeSelector.Empty() {
		msg += fmt.Sprintf(" matching the nodeSelector of pool %q", a.Pool.Name)
	}
	// A node must run a local endpoint only when every sharer has
	// externalTrafficPolicy=Local (nodePicker.eligible).
	if !slices.ContainsFunc(sharers, func(s *v1.Service) bool {
		return s.Spec.ExternalTrafficPolicy != v1.ServiceExternalTrafficPolicyLocal
	}) {
		msg += " with a ready local endpoint (externalTrafficPolicy=Local)"
	}
	return msg + " to announce " + a.Addr.String()
}

// afterRelease forgets the announcing node of dropped addresses nobody
// holds any more, queues the remaining holders of shared ones (their node
// choice may change), and queues wake, the Services waiting for an
// address, longest waiting first.
func (c *Controller) afterRelease(key types.NamespacedName, dropped []netip.Addr, wake []types.NamespacedName) {
	for _, addr := range dropped {
		holders := c.alloc.Holders(addr)
		if len(holders) == 0 {
			c.mu.Lock()
			delete(c.announcer, addr)
			c.mu.Unlock()
			continue
		}
		for _, h := range holders {
			if h != key {
				c.queue.Add(h)
			}
		}
	}
	for _, w := range wake {
		if w != key {
			c.queue.Add(w)
		}
	}
}

// waiters returns the Services waiting for an address, longest waiting
// first.
func (c *Controller) waiters() []types.NamespacedName { return c.alloc.Waiters() }

func describeAssignments(as []ipam.Assignment) string {
	parts := make([]string, len(as))
	for i, a := range as {
		parts[i] = fmt.Sprintf("%s from pool %q (ipMode %s)", a.Addr, a.Pool.Name, a.Pool.Mode)
	}
	return strings.Join(parts, ", ")
}

func joinAddrs(as []netip.Addr) string {
	parts := make([]string, len(as))
	for i, a := range as {
		parts[i] = a.String()
	}
	return strings.Join(parts, ", ")
}
