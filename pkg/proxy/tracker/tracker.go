package tracker

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Tracker combines a ServiceChangeTracker and an EndpointsChangeTracker and signals the
// proxier's sync loop through Notify whenever either records a change.
type Tracker struct {
	Services  *ServiceChangeTracker
	Endpoints *EndpointsChangeTracker

	notify chan struct{}
}

// New returns an empty Tracker.
func New() *Tracker {
	t := &Tracker{notify: make(chan struct{}, 1)}
	t.Services = NewServiceChangeTracker(t.signal)
	t.Endpoints = NewEndpointsChangeTracker(t.signal)
	return t
}

func (t *Tracker) signal() {
	select {
	case t.notify <- struct{}{}:
	default: // a signal is already pending
	}
}

// Notify returns a channel that receives a value after one or more changes were recorded. Many
// changes may coalesce into one signal, so the receiver should drain everything pending.
func (t *Tracker) Notify() <-chan struct{} { return t.notify }

// PendingServices is the union of the Services with a pending Service change and those whose
// endpoints are dirty.
func (t *Tracker) PendingServices() sets.Set[types.NamespacedName] {
	return t.Services.Pending().Union(t.Endpoints.Dirty())
}

// Drained is everything a sync has to process.
type Drained struct {
	ServiceChanges map[types.NamespacedName]ServiceChange
	// DirtyEndpoints are the Services whose EndpointSlices changed; read the current slices
	// with Tracker.Endpoints.SlicesFor.
	DirtyEndpoints sets.Set[types.NamespacedName]
	// TriggerTimes are the latest endpoints last-change-trigger-time per dirty Service.
	TriggerTimes map[types.NamespacedName]time.Time
}

// Services is the union of ServiceChanges' keys and DirtyEndpoints.
func (d Drained) Services() sets.Set[types.NamespacedName] {
	out := d.DirtyEndpoints.Clone()
	for k := range d.ServiceChanges {
		out.Insert(k)
	}
	return out
}

// Drain empties both trackers and returns what was pending.
func (t *Tracker) Drain() Drained {
	changes := t.Services.Drain()
	dirty, times := t.Endpoints.DrainDirty()
	return Drained{ServiceChanges: changes, DirtyEndpoints: dirty, TriggerTimes: times}
}

// ServiceHandler returns informer event handlers feeding the Service tracker. Objects that are
// not Services, including tombstones holding something else, are logged and ignored.
func (t *Tracker) ServiceHandler() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if svc, ok := asService(obj); ok {
				t.Services.OnServiceAdd(svc)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			oldSvc, ok1 := asService(oldObj)
			newSvc, ok2 := asService(newObj)
			if ok1 && ok2 {
				t.Services.OnServiceUpdate(oldSvc, newSvc)
			}
		},
		DeleteFunc: func(obj any) {
			if svc, ok := asService(unwrapTombstone(obj)); ok {
				t.Services.OnServiceDelete(svc)
			}
		},
	}
}

// EndpointSliceHandler returns informer event handlers feeding the endpoints tracker.
func (t *Tracker) EndpointSliceHandler() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if s, ok := asSlice(obj); ok {
				t.Endpoints.OnEndpointSliceAdd(s)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			oldS, ok1 := asSlice(oldObj)
			newS, ok2 := asSlice(newObj)
			if ok1 && ok2 {
				t.Endpoints.OnEndpointSliceUpdate(oldS, newS)
			}
		},
		DeleteFunc: func(obj any) {
			if s, ok := asSlice(unwrapTombstone(obj)); ok {
				t.Endpoints.OnEndpointSliceDelete(s)
			}
		},
	}
}

func unwrapTombstone(obj any) any {
	if ts, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return ts.Obj
	}
	return obj
}

func asService(obj any) (*v1.Service, bool) {
	svc, ok := obj.(*v1.Service)
	if !ok || svc == nil {
		klog.ErrorS(nil, "Ignoring unexpected object in Service event handler", "type", typeName(obj))
		return nil, false
	}
	return svc, true
}

func asSlice(obj any) (*discovery.EndpointSlice, bool) {
	s, ok := obj.(*discovery.EndpointSlice)
	if !ok || s == nil {
		klog.ErrorS(nil, "Ignoring unexpected object in EndpointSlice event handler", "type", typeName(obj))
		return nil, false
	}
	return s, true
}

func typeName(obj any) string { return fmt.Sprintf("%T", obj) }
