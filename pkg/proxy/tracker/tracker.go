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

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
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
	return handler("Service", exactly[v1.Service], t.Services.OnServiceAdd, t.Services.OnServiceUpdate, t.Services.OnServiceDelete)
}

// EndpointSliceHandler returns informer event handlers feeding the endpoints tracker. It takes
// slices in their compact form (model.EndpointSlice, what the agent's informer stores) or as
// API objects (converted).
func (t *Tracker) EndpointSliceHandler() cache.ResourceEventHandlerFuncs {
	return handler("EndpointSlice", endpointSliceOf, t.Endpoints.OnSliceAdd, t.Endpoints.OnSliceUpdate, t.Endpoints.OnSliceDelete)
}

// exactly returns obj when it is a non-nil *T.
func exactly[T any](obj any) (*T, bool) {
	o, ok := obj.(*T)
	return o, ok && o != nil
}

// endpointSliceOf returns obj's compact form when it is an EndpointSlice in either form.
func endpointSliceOf(obj any) (*model.EndpointSlice, bool) {
	switch o := obj.(type) {
	case *model.EndpointSlice:
		return o, o != nil
	case *discovery.EndpointSlice:
		return compact(o), o != nil
	}
	return nil, false
}

// handler adapts typed add, update and delete callbacks to informer event handlers: deletes
// are unwrapped from tombstones, and objects that conv does not take are logged and ignored.
func handler[T any](kind string, conv func(any) (*T, bool), add func(*T), update func(oldObj, newObj *T), del func(*T)) cache.ResourceEventHandlerFuncs {
	as := func(obj any) (*T, bool) {
		o, ok := conv(obj)
		if !ok {
			klog.ErrorS(nil, "Ignoring unexpected object in "+kind+" event handler", "type", typeName(obj))
			return nil, false
		}
		return o, true
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if o, ok := as(obj); ok {
				add(o)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o1, ok1 := as(oldObj)
			o2, ok2 := as(newObj)
			if ok1 && ok2 {
				update(o1, o2)
			}
		},
		DeleteFunc: func(obj any) {
			if ts, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = ts.Obj
			}
			if o, ok := as(obj); ok {
				del(o)
			}
		},
	}
}

func typeName(obj any) string { return fmt.Sprintf("%T", obj) }
