package loadbalancer

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/antrea-proxy/antrea-proxy/pkg/lbapi"
)

// isOurFinalizer reports whether f is the controller's finalizer: the well-known LoadBalancer
// cleanup finalizer, or the one earlier releases wrote (lbapi.LegacyFinalizer).
func isOurFinalizer(f string) bool { return f == lbapi.Finalizer || f == lbapi.LegacyFinalizer }

// ownsFinalizer reports whether svc carries a finalizer of the controller of class: the legacy
// finalizer, or the well-known one on a Service without a class or of class. Other providers
// (a cloud's service controller) write the well-known finalizer too, on Services of their own
// class; those are never touched. A Service's loadBalancerClass cannot change once set.
func ownsFinalizer(svc *v1.Service, class string) bool {
	if slices.Contains(svc.Finalizers, lbapi.LegacyFinalizer) {
		return true
	}
	c := svc.Spec.LoadBalancerClass
	return slices.Contains(svc.Finalizers, lbapi.Finalizer) && (c == nil || *c == class)
}

// ours reports whether svc carries this controller's finalizer: ownsFinalizer, or the
// well-known finalizer on a Service the controller still holds or retires addresses for (its
// class changed away from ours).
func (c *Controller) ours(svc *v1.Service) bool {
	if ownsFinalizer(svc, c.class) {
		return true
	}
	if !slices.Contains(svc.Finalizers, lbapi.Finalizer) {
		return false
	}
	key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	return len(c.alloc.Assigned(key)) > 0 || len(c.alloc.Retiring(key)) > 0
}

// finalizerUpToDate reports whether fs holds the current finalizer and not the legacy one.
func finalizerUpToDate(fs []string) bool {
	return slices.Contains(fs, lbapi.Finalizer) && !slices.Contains(fs, lbapi.LegacyFinalizer)
}

// withFinalizer returns fs with the current finalizer and without the legacy one (a Service
// adopted from an earlier release moves to the well-known name).
func withFinalizer(fs []string) []string {
	out := slices.DeleteFunc(slices.Clone(fs), func(f string) bool { return f == lbapi.LegacyFinalizer })
	if !slices.Contains(out, lbapi.Finalizer) {
		out = append(out, lbapi.Finalizer)
	}
	return out
}

// withoutFinalizer returns fs without any of the controller's finalizers.
func withoutFinalizer(fs []string) []string {
	return slices.DeleteFunc(slices.Clone(fs), isOurFinalizer)
}
