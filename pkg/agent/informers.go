package agent

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
)

// lastAppliedAnnotation is kubectl's copy of the whole applied object: no part of the agent
// reads it, and on a Service it is often larger than the rest of the object.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// newInformerFactory returns the agent's one informer factory, whose caches keep only what the
// agent reads (see trimmer): at 10,000 Services the informer caches are a large part of the
// agent's memory, and the proxier's trackers point into them.
func newInformerFactory(client kubernetes.Interface) informers.SharedInformerFactory {
	return informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(newTrimmer().transform))
}

// trimmer drops, from the objects the agent's informers receive, the fields no part of the agent
// reads, before they are stored in a cache or handed to a handler:
//
//   - every object: metadata.managedFields;
//   - Services and EndpointSlices: the kubectl.kubernetes.io/last-applied-configuration
//     annotation (every other annotation and label is kept: the project's own Service
//     annotations of pkg/lbapi, the endpoints' last-change-trigger-time, and whatever a change
//     tracker compares);
//   - Services: spec.selector (EndpointSlices carry the endpoints; nothing in the agent selects
//     Pods);
//   - EndpointSlices: metadata.ownerReferences, uid and generateName (the proxier finds a
//     slice's Service by its kubernetes.io/service-name label and keys it by namespace and
//     name);
//   - Services and EndpointSlices share one copy of each namespace string;
//   - EndpointSlice endpoints: targetRef, hostname and deprecatedTopology (the proxier reads
//     addresses, conditions, nodeName, zone and hints); the nodeName and zone strings of all
//     endpoints share one copy per distinct value, and the condition booleans one true and one
//     false; the endpoints are copied into an array of their exact length (the decoder grows
//     its array by doubling: 10 endpoints arrive in room for 16, 1.5 KB instead of 1 KB);
//   - Nodes: status.images (the data path reads spec, addresses and labels; the health checks
//     taints and the deletion timestamp).
//
// Informer objects are never modified after the transform, so the shared values are read-only.
// A trimmer is safe for concurrent use: the factory's informers call it from their own
// goroutines.
type trimmer struct {
	mu          sync.Mutex
	yes, no     *bool
	strs        map[string]*string
	maxInterned int
}

func newTrimmer() *trimmer {
	yes, no := true, false
	return &trimmer{yes: &yes, no: &no, strs: map[string]*string{}, maxInterned: 1 << 16}
}

// transform is the factory's transform (a cache.TransformFunc); it is idempotent. Tombstones
// (cache.DeletedFinalStateUnknown) never reach it; objects of other types only lose their
// managed fields.
func (t *trimmer) transform(obj any) (any, error) {
	switch o := obj.(type) {
	case *v1.Service:
		o.ManagedFields, o.Spec.Selector = nil, nil
		delete(o.Annotations, lastAppliedAnnotation)
		o.Namespace = t.internValue(o.Namespace)
	case *discovery.EndpointSlice:
		o.ManagedFields, o.OwnerReferences, o.UID, o.GenerateName = nil, nil, "", ""
		delete(o.Annotations, lastAppliedAnnotation)
		o.Namespace = t.internValue(o.Namespace)
		o.Endpoints = t.trimEndpoints(o.Endpoints)
	case *v1.Node:
		o.ManagedFields = nil
		o.Status.Images = nil
	default:
		if m, err := meta.Accessor(obj); err == nil {
			m.SetManagedFields(nil)
		}
	}
	return obj, nil
}

// trimEndpoints trims eps and returns them in an array of their exact length.
func (t *trimmer) trimEndpoints(eps []discovery.Endpoint) []discovery.Endpoint {
	if cap(eps) > len(eps) {
		eps = append(make([]discovery.Endpoint, 0, len(eps)), eps...)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range eps {
		e := &eps[i]
		e.TargetRef, e.Hostname, e.DeprecatedTopology = nil, nil, nil
		e.NodeName, e.Zone = t.intern(e.NodeName), t.intern(e.Zone)
		c := &e.Conditions
		c.Ready, c.Serving, c.Terminating = t.boolean(c.Ready), t.boolean(c.Serving), t.boolean(c.Terminating)
	}
	return eps
}

// intern returns the shared copy of *s. Past maxInterned distinct values (node names and
// zones: a cluster has far fewer) it returns s itself, so the table stays bounded.
func (t *trimmer) intern(s *string) *string {
	if s == nil {
		return nil
	}
	if p, ok := t.strs[*s]; ok {
		return p
	}
	if len(t.strs) >= t.maxInterned {
		return s
	}
	t.strs[*s] = s
	return s
}

// internValue returns the shared copy of s, as intern does.
func (t *trimmer) internValue(s string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return *t.intern(&s)
}

func (t *trimmer) boolean(b *bool) *bool {
	switch {
	case b == nil:
		return nil
	case *b:
		return t.yes
	}
	return t.no
}
