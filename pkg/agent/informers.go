package agent

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
)

// lastAppliedAnnotation is kubectl's copy of the whole applied object: no part of the agent
// reads it, and on a Service it is often larger than the rest of the object.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// newInformerFactory returns the agent's one informer factory, whose caches keep only what the
// agent reads (see trimmer): at 10,000 Services the informer caches are a large part of the
// agent's memory, and the proxier's trackers point into them. Its EndpointSlice informer holds
// model.EndpointSlice values, not API objects: only the proxier's handler reads them (it takes
// both forms), and nothing may use the factory's EndpointSlice lister.
func newInformerFactory(client kubernetes.Interface) informers.SharedInformerFactory {
	return informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(newTrimmer().transform))
}

// trimmer drops, from the objects the agent's informers receive, the fields no part of the agent
// reads, before they are stored in a cache or handed to a handler:
//
//   - every object: metadata.managedFields;
//   - Services: the kubectl.kubernetes.io/last-applied-configuration annotation (every other
//     annotation and label is kept: the project's own Service annotations of pkg/lbapi, and
//     whatever a change tracker compares) and spec.selector (EndpointSlices carry the
//     endpoints; nothing in the agent selects Pods);
//   - EndpointSlices are converted to model.EndpointSlice, which keeps what the proxier reads
//     (its namespace, name, uid and resourceVersion, Service, address type, ports, trigger
//     time, and of each endpoint its first address, node, zone, hints and conditions) in about
//     a third of the memory: at 30,000 Services the API objects were 70 MB of the agent's heap;
//   - Services and EndpointSlices share one copy of each namespace string (and the endpoints
//     one copy of each node name and zone, model.EndpointSlice's unique handles, which nobody
//     can make the agent keep once no endpoint uses them);
//   - Services and EndpointSlices share what many of them repeat (sharer: enum-like strings,
//     IP family and port lists) and keep their name, uid and resourceVersion in one string:
//     the collection the runtime forces every two minutes at rest marks every object the
//     caches hold, and these were a third of them;
//   - Nodes: status.images (the data path reads spec, addresses and labels; the health checks
//     taints and the deletion timestamp).
//
// Informer objects are never modified after the transform, so the shared values are read-only.
// A trimmer is safe for concurrent use: the factory's informers call it from their own
// goroutines.
type trimmer struct {
	mu sync.Mutex
	// namespaces are the shared namespace strings; shared the values Services and
	// EndpointSlices repeat (tables apart: a namespace's users can fill the latter).
	namespaces boundedTable[string, string]
	shared     *sharer
}

func newTrimmer() *trimmer {
	return &trimmer{namespaces: boundedTable[string, string]{max: maxShared}, shared: newSharer(maxShared)}
}

// transform is the factory's transform (a cache.TransformFunc); it is idempotent (a converted
// EndpointSlice is returned as it is). Tombstones (cache.DeletedFinalStateUnknown) never reach
// it; objects of other types only lose their managed fields.
func (t *trimmer) transform(obj any) (any, error) {
	out := t.trimOnly(obj)
	t.mu.Lock()
	defer t.mu.Unlock()
	switch o := out.(type) {
	case *v1.Service:
		t.shared.service(o)
	case *model.EndpointSlice:
		if out != obj { // converted now, not yet handed to anyone
			t.shared.slice(o)
		}
	}
	return out, nil
}

// trimOnly drops what nobody reads and shares the namespaces, without the sharer's work.
func (t *trimmer) trimOnly(obj any) any {
	switch o := obj.(type) {
	case *v1.Service:
		o.ManagedFields, o.Spec.Selector = nil, nil
		delete(o.Annotations, lastAppliedAnnotation)
		o.Namespace = t.intern(o.Namespace)
	case *discovery.EndpointSlice:
		out := model.NewEndpointSlice(o)
		out.Namespace = t.intern(out.Namespace)
		return out
	case *model.EndpointSlice:
	case *v1.Node:
		o.ManagedFields = nil
		o.Status.Images = nil
	default:
		if m, err := meta.Accessor(obj); err == nil {
			m.SetManagedFields(nil)
		}
	}
	return obj
}

// intern returns the shared copy of namespace s. Past maxShared distinct values (a cluster has
// far fewer namespaces, and only its administrators create them) it returns s itself, so the
// table stays bounded.
func (t *trimmer) intern(s string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.namespaces.share(s, s)
}
