package agent

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// serviceCIDRGroupVersion and serviceCIDRResource name the networking.k8s.io/v1 ServiceCIDR API
// (GA in Kubernetes 1.33).
const (
	serviceCIDRGroupVersion = "networking.k8s.io/v1"
	serviceCIDRResource     = "servicecidrs"
)

// ServiceCIDRSink receives the cluster's ServiceCIDRs (the proxier's SetServiceCIDRs).
type ServiceCIDRSink interface {
	SetServiceCIDRs([]netip.Prefix)
}

// WatchServiceCIDRs feeds sink with the spec.cidrs of every ServiceCIDR, from an informer of
// factory, and returns once its cache has synced and sink has the first set, so that the
// proxier's first sync knows them. Like kube-proxy (pkg/proxy/config's ServiceCIDRConfig), it
// takes every ServiceCIDR, whatever its Ready condition and also while it is being deleted: a
// ServiceCIDR's finalizer holds its deletion while ClusterIPs are allocated from it, so its
// range still names Service addresses.
//
// When the API is absent (discovery does not list the resource) or the agent may not list it
// (NotFound, Forbidden), it logs that once and returns false: no ServiceCIDR is known and the
// proxier behaves as without one (unallocated ClusterIPs are not dropped, ExternalIPs are not
// checked against them). Other errors are returned.
func WatchServiceCIDRs(ctx context.Context, client kubernetes.Interface, factory informers.SharedInformerFactory, sink ServiceCIDRSink) (bool, error) {
	if ok, why := serviceCIDRsServed(ctx, client); !ok {
		klog.InfoS("Not watching ServiceCIDRs; unallocated ClusterIPs are not dropped and ExternalIPs are not checked against them", "reason", why)
		return false, nil
	}
	inf := factory.Networking().V1().ServiceCIDRs()
	update := func(any) {
		list, err := inf.Lister().List(labels.Everything())
		if err != nil {
			klog.ErrorS(err, "Listing ServiceCIDRs from the cache")
			return
		}
		sink.SetServiceCIDRs(serviceCIDRPrefixes(list))
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    update,
		UpdateFunc: func(_, n any) { update(n) },
		DeleteFunc: update,
	}); err != nil {
		return false, fmt.Errorf("adding ServiceCIDR handler: %w", err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		return false, fmt.Errorf("ServiceCIDR cache did not sync: %w", ctx.Err())
	}
	update(nil)
	return true, nil
}

// serviceCIDRsServed reports whether the API server serves ServiceCIDRs to this agent, and why
// not.
func serviceCIDRsServed(ctx context.Context, client kubernetes.Interface) (bool, string) {
	if client == nil {
		return false, "no API client"
	}
	list, err := client.Discovery().ServerResourcesForGroupVersion(serviceCIDRGroupVersion)
	if err != nil {
		return false, fmt.Sprintf("discovery of %s: %v", serviceCIDRGroupVersion, err)
	}
	if !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == serviceCIDRResource }) {
		return false, serviceCIDRGroupVersion + " has no " + serviceCIDRResource
	}
	_, err = client.NetworkingV1().ServiceCIDRs().List(ctx, metav1.ListOptions{Limit: 1})
	switch {
	case apierrors.IsNotFound(err), apierrors.IsForbidden(err):
		return false, err.Error()
	case err != nil:
		// Anything else (a timeout) is not a missing API: the informer retries.
		klog.InfoS("Listing ServiceCIDRs failed; the informer will retry", "err", err)
	}
	return true, ""
}

// serviceCIDRPrefixes returns the valid prefixes of every ServiceCIDR's spec.cidrs.
func serviceCIDRPrefixes(cidrs []*networkingv1.ServiceCIDR) []netip.Prefix {
	var out []netip.Prefix
	for _, c := range cidrs {
		for _, s := range c.Spec.CIDRs {
			if p, err := netip.ParsePrefix(s); err == nil {
				out = append(out, p.Masked())
			} else {
				klog.InfoS("Ignoring an invalid ServiceCIDR range", "serviceCIDR", c.Name, "cidr", s)
			}
		}
	}
	return out
}
