package tracker

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// ServiceChange is the net change of one Service since the last drain. Previous is the object
// as of the last drain (nil if the Service did not exist then), Current the latest one (nil if
// it has been deleted).
type ServiceChange struct {
	Previous *v1.Service
	Current  *v1.Service
}

// ServiceChangeTracker records Service changes. Its zero value is not usable: use
// NewServiceChangeTracker. It is safe for concurrent use.
type ServiceChangeTracker struct {
	onChange func()

	mu      sync.Mutex
	changes map[types.NamespacedName]*ServiceChange
}

// NewServiceChangeTracker returns an empty tracker. onChange, if not nil, is called (without any
// lock held) after every event that leaves a pending change.
func NewServiceChangeTracker(onChange func()) *ServiceChangeTracker {
	return &ServiceChangeTracker{onChange: onChange, changes: map[types.NamespacedName]*ServiceChange{}}
}

// OnServiceAdd records a created Service.
func (t *ServiceChangeTracker) OnServiceAdd(svc *v1.Service) { t.record(nil, svc) }

// OnServiceUpdate records an updated Service.
func (t *ServiceChangeTracker) OnServiceUpdate(oldSvc, newSvc *v1.Service) { t.record(oldSvc, newSvc) }

// OnServiceDelete records a deleted Service.
func (t *ServiceChangeTracker) OnServiceDelete(svc *v1.Service) { t.record(svc, nil) }

func (t *ServiceChangeTracker) record(prev, cur *v1.Service) {
	key, ok := serviceKey(prev, cur)
	if !ok {
		return
	}
	pending := t.recordLocked(key, prev, cur)
	if pending && t.onChange != nil {
		t.onChange()
	}
}

func (t *ServiceChangeTracker) recordLocked(key types.NamespacedName, prev, cur *v1.Service) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.changes[key]
	if !ok {
		c = &ServiceChange{Previous: prev}
		t.changes[key] = c
	}
	c.Current = cur
	if sameService(c.Previous, c.Current) {
		// The changes cancel out: add then delete, or an update back to the synced state
		// (or an informer resync that changed nothing).
		delete(t.changes, key)
		return false
	}
	return true
}

// Changes returns a copy of the pending changes without clearing them.
func (t *ServiceChangeTracker) Changes() map[types.NamespacedName]ServiceChange {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[types.NamespacedName]ServiceChange, len(t.changes))
	for k, c := range t.changes {
		out[k] = *c
	}
	return out
}

// Drain returns the pending changes and empties the tracker: the next change of a Service will
// have the returned Current as its Previous.
func (t *ServiceChangeTracker) Drain() map[types.NamespacedName]ServiceChange {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[types.NamespacedName]ServiceChange, len(t.changes))
	for k, c := range t.changes {
		out[k] = *c
	}
	t.changes = map[types.NamespacedName]*ServiceChange{}
	return out
}

// Pending returns the Services with a pending change.
func (t *ServiceChangeTracker) Pending() sets.Set[types.NamespacedName] {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := sets.New[types.NamespacedName]()
	for k := range t.changes {
		out.Insert(k)
	}
	return out
}

func serviceKey(prev, cur *v1.Service) (types.NamespacedName, bool) {
	switch {
	case cur != nil:
		return types.NamespacedName{Namespace: cur.Namespace, Name: cur.Name}, true
	case prev != nil:
		return types.NamespacedName{Namespace: prev.Namespace, Name: prev.Name}, true
	}
	return types.NamespacedName{}, false
}

// sameService reports whether two versions of a Service are the same for the proxier: same
// existence, and equal labels, annotations, spec and status. Metadata such as resourceVersion
// and managedFields is ignored, so informer resyncs are not changes. The UID is compared too:
// a Service deleted and re-created with the same content is still a change.
func sameService(a, b *v1.Service) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.UID == b.UID &&
		equality.Semantic.DeepEqual(a.Labels, b.Labels) &&
		equality.Semantic.DeepEqual(a.Annotations, b.Annotations) &&
		equality.Semantic.DeepEqual(a.Spec, b.Spec) &&
		equality.Semantic.DeepEqual(a.Status, b.Status)
}
