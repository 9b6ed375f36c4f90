package tracker

import (
	"slices"
	"strings"
	"sync"
	"time"

	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
)

// EndpointsChangeTracker keeps the current EndpointSlices of every Service and the Services
// whose slices changed since the last drain. Slices are attributed to the Service named by their
// kubernetes.io/service-name label; slices without it are ignored. Its zero value is not usable:
// use NewEndpointsChangeTracker. It is safe for concurrent use.
type EndpointsChangeTracker struct {
	onChange func()

	mu sync.Mutex
	// slices holds the current slices of each Service with at least one, and their generation.
	slices map[types.NamespacedName]serviceSlices
	// owners maps each stored slice (namespace and slice name) to the name of the Service it is
	// stored under, in the slice's namespace (a slice only ever serves a Service of its own
	// namespace, so the name alone is kept: sliceOwner).
	owners map[types.NamespacedName]string
	dirty  sets.Set[types.NamespacedName]
	// triggerTimes holds, per dirty Service, the latest last-change-trigger-time seen on one of
	// its changed slices since the last drain.
	triggerTimes map[types.NamespacedName]time.Time
	counter      uint64
}

// serviceSlices are one Service's current slices (in their compact form, model.EndpointSlice),
// sorted by name (most Services have one: a
// sorted array costs a pointer per slice where a map by name cost about 300 bytes per Service),
// and gen, the value of the tracker's counter when they last changed (Generation).
type serviceSlices struct {
	gen    uint64
	byName []*model.EndpointSlice
}

// find returns the index of the slice named name, or where it would be inserted.
func (s serviceSlices) find(name string) (int, bool) {
	return slices.BinarySearchFunc(s.byName, name, func(e *model.EndpointSlice, n string) int {
		return strings.Compare(e.Name, n)
	})
}

// get returns the slice named name, nil when none.
func (s serviceSlices) get(name string) *model.EndpointSlice {
	if i, ok := s.find(name); ok {
		return s.byName[i]
	}
	return nil
}

// set stores slice, replacing the one of the same name.
func (s *serviceSlices) set(slice *model.EndpointSlice) {
	if i, ok := s.find(slice.Name); ok {
		s.byName[i] = slice
	} else {
		s.byName = slices.Insert(s.byName, i, slice)
	}
}

// remove forgets the slice named name.
func (s *serviceSlices) remove(name string) {
	if i, ok := s.find(name); ok {
		s.byName = slices.Delete(s.byName, i, i+1)
	}
}

// NewEndpointsChangeTracker returns an empty tracker. onChange, if not nil, is called (without
// any lock held) after every event that marks a Service dirty.
func NewEndpointsChangeTracker(onChange func()) *EndpointsChangeTracker {
	return &EndpointsChangeTracker{
		onChange:     onChange,
		slices:       map[types.NamespacedName]serviceSlices{},
		owners:       map[types.NamespacedName]string{},
		dirty:        sets.New[types.NamespacedName](),
		triggerTimes: map[types.NamespacedName]time.Time{},
	}
}

// OnEndpointSliceAdd records a created slice.
func (t *EndpointsChangeTracker) OnEndpointSliceAdd(slice *discovery.EndpointSlice) {
	t.OnSliceAdd(compact(slice))
}

// OnEndpointSliceUpdate records an updated slice. When the update moves the slice to another
// Service (its service-name label changed), both Services become dirty.
func (t *EndpointsChangeTracker) OnEndpointSliceUpdate(oldSlice, newSlice *discovery.EndpointSlice) {
	t.OnSliceUpdate(compact(oldSlice), compact(newSlice))
}

// OnEndpointSliceDelete records a deleted slice.
func (t *EndpointsChangeTracker) OnEndpointSliceDelete(slice *discovery.EndpointSlice) {
	t.OnSliceDelete(compact(slice))
}

// OnSliceAdd, OnSliceUpdate and OnSliceDelete are OnEndpointSliceAdd, Update and Delete for a
// slice already in its compact form (the agent's informer stores that form). The tracker keeps
// slice, which must not be modified afterwards.
func (t *EndpointsChangeTracker) OnSliceAdd(slice *model.EndpointSlice) { t.apply(nil, slice) }

// OnSliceUpdate: see OnSliceAdd.
func (t *EndpointsChangeTracker) OnSliceUpdate(oldSlice, newSlice *model.EndpointSlice) {
	t.apply(oldSlice, newSlice)
}

// OnSliceDelete: see OnSliceAdd.
func (t *EndpointsChangeTracker) OnSliceDelete(slice *model.EndpointSlice) { t.apply(slice, nil) }

// compact converts an API slice (nil stays nil).
func compact(slice *discovery.EndpointSlice) *model.EndpointSlice {
	if slice == nil {
		return nil
	}
	return model.NewEndpointSlice(slice)
}

func (t *EndpointsChangeTracker) apply(oldSlice, newSlice *model.EndpointSlice) {
	if t.applyLocked(oldSlice, newSlice) && t.onChange != nil {
		t.onChange()
	}
}

func (t *EndpointsChangeTracker) applyLocked(oldSlice, newSlice *model.EndpointSlice) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	ref := newSlice
	if ref == nil {
		ref = oldSlice
	}
	if ref == nil {
		return false
	}
	id := types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}
	// The tracker's own record of where the slice is stored is authoritative (not oldSlice's
	// labels), so a missed or coalesced informer event cannot leave a stale copy behind.
	prevOwner, had := t.sliceOwner(id)
	if newSlice == nil {
		if !had {
			return false
		}
		t.removeLocked(id, prevOwner)
		return true
	}
	newOwner, ok := owner(newSlice)
	changed := false
	if had && (!ok || prevOwner != newOwner) {
		t.removeLocked(id, prevOwner)
		had = false
		changed = true
	}
	if !ok {
		return changed
	}
	ss := t.slices[newOwner]
	if had {
		if cur := ss.get(id.Name); cur != nil && cur.Same(newSlice) {
			// Informer resync or a metadata-only update: nothing the proxier uses changed.
			ss.set(newSlice)
			return changed
		}
	}
	ss.set(newSlice)
	t.slices[newOwner] = ss
	t.owners[id] = newOwner.Name
	t.markLocked(newOwner)
	t.recordTriggerTime(newOwner, newSlice)
	return true
}

// sliceOwner returns the Service slice id is stored under; ok false when it is not stored.
func (t *EndpointsChangeTracker) sliceOwner(id types.NamespacedName) (svc types.NamespacedName, ok bool) {
	name, ok := t.owners[id]
	if !ok {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: id.Namespace, Name: name}, true
}

// removeLocked forgets slice id stored under Service svc and marks svc dirty.
func (t *EndpointsChangeTracker) removeLocked(id, svc types.NamespacedName) {
	delete(t.owners, id)
	ss := t.slices[svc]
	ss.remove(id.Name)
	if len(ss.byName) == 0 {
		delete(t.slices, svc)
	} else {
		t.slices[svc] = ss
	}
	t.markLocked(svc)
}

// markLocked marks svc dirty and gives its slices a new generation.
func (t *EndpointsChangeTracker) markLocked(svc types.NamespacedName) {
	t.dirty.Insert(svc)
	t.counter++
	if ss, ok := t.slices[svc]; ok {
		ss.gen = t.counter
		t.slices[svc] = ss
	}
}

// Generation returns a number that changes whenever the slices of svc change (0 when it has
// none): the same number means the same slices, whether or not a drain happened in between.
// Numbers are never reused within a tracker.
func (t *EndpointsChangeTracker) Generation(svc types.NamespacedName) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.slices[svc].gen
}

// LastGeneration returns the latest generation handed out to any Service (0 before the first
// slice): the same number means that no Service's slices changed in between, so a caller that
// compares every Service's Generation with what it computed from can skip the walk.
func (t *EndpointsChangeTracker) LastGeneration() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.counter
}

func (t *EndpointsChangeTracker) recordTriggerTime(svc types.NamespacedName, slice *model.EndpointSlice) {
	if slice.BadTriggerTime != "" {
		klog.V(4).InfoS("Ignoring unparseable last-change-trigger-time", "endpointSlice", klog.KRef(slice.Namespace, slice.Name), "value", slice.BadTriggerTime)
		return
	}
	ts := slice.TriggerTime
	if ts.IsZero() {
		return
	}
	if prev, ok := t.triggerTimes[svc]; !ok || ts.After(prev) {
		t.triggerTimes[svc] = ts
	}
}

// SlicesFor returns the current slices of a Service, sorted by name. The slices are shared with
// the informer cache and must not be modified.
func (t *EndpointsChangeTracker) SlicesFor(svc types.NamespacedName) []*model.EndpointSlice {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.slices[svc].byName)
}

// Services returns every Service that currently has at least one slice.
func (t *EndpointsChangeTracker) Services() sets.Set[types.NamespacedName] {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := sets.New[types.NamespacedName]()
	for svc := range t.slices {
		out.Insert(svc)
	}
	return out
}

// Dirty returns the Services whose slices changed since the last drain, without clearing them.
func (t *EndpointsChangeTracker) Dirty() sets.Set[types.NamespacedName] {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.dirty.Clone()
}

// DrainDirty returns the Services whose slices changed since the last drain, with the latest
// last-change-trigger-time seen for each (Services without a parseable annotation are absent
// from the map), and clears both. The current slices are kept.
func (t *EndpointsChangeTracker) DrainDirty() (sets.Set[types.NamespacedName], map[types.NamespacedName]time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	dirty, times := t.dirty, t.triggerTimes
	t.dirty = sets.New[types.NamespacedName]()
	t.triggerTimes = map[types.NamespacedName]time.Time{}
	return dirty, times
}

// owner returns the Service a slice belongs to.
func owner(slice *model.EndpointSlice) (types.NamespacedName, bool) {
	if slice.Service == "" {
		return types.NamespacedName{}, false
	}
	if slice.Headless {
		// kube-proxy watches EndpointSlices with the selector !service.kubernetes.io/headless:
		// a slice with the label (a headless Service's, or one labelled so by hand) serves no
		// Service, and one that gains it is gone.
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: slice.Namespace, Name: slice.Service}, true
}
