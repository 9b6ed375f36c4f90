package model

import (
	"net/netip"
	"time"
	"unique"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// EndpointSlice is what the proxier reads of a discovery/v1 EndpointSlice, in about a third of
// its memory: an EndpointSlice of 10 endpoints decodes to about 2.3 KB (each endpoint's struct,
// address list and address string, the labels map), this to about 0.9 KB. The agent's informer
// stores EndpointSlices in this form (its transform converts them), so its cache and the
// proxier's trackers share one small copy.
//
// It keeps the slice's namespace, name, uid and resourceVersion (the informer keys, compares and
// checks by them: it implements runtime.Object and metav1.ObjectMetaAccessor), its Service (the
// kubernetes.io/service-name label) and whether it is labelled headless, its address type and
// ports, its last-change-trigger-time, and of each endpoint its first address, node, zone,
// hints and conditions with their documented defaults applied. Nothing else of the API object
// is read by the proxier. Values are never modified after NewEndpointSlice.
type EndpointSlice struct {
	Namespace, Name, ResourceVersion string
	UID                              types.UID
	// Service is the kubernetes.io/service-name label ("" without it); Headless is true when
	// the slice has the service.kubernetes.io/headless label.
	Service  string
	Headless bool
	// AddressType and Ports are the slice's own (Ports shared with the object converted).
	AddressType discovery.AddressType
	Ports       []discovery.EndpointPort
	Endpoints   []SliceEndpoint
	// Hints holds the endpoints' topology hints by index, nil when none has any (HintsOf).
	Hints []*discovery.EndpointHints
	// TriggerTime is the endpoints.kubernetes.io/last-change-trigger-time annotation, zero
	// without it; BadTriggerTime is the annotation when it does not parse (RFC 3339).
	TriggerTime    time.Time
	BadTriggerTime string
}

// SliceEndpoint is one endpoint of an EndpointSlice, in 48 bytes.
type SliceEndpoint struct {
	// Addr is the endpoint's first address; invalid when it has none or it does not parse.
	Addr netip.Addr
	// nodeName and zone are canonical copies (unique.Make; zero: unset), shared by every
	// endpoint of the same node or zone for as long as one of them holds it; Node and Zone read
	// them.
	nodeName, zone unique.Handle[string]
	// Ready, Serving and Terminating are the conditions with the API's defaults: ready nil
	// means true, serving nil means the ready value, terminating nil means false.
	Ready, Serving, Terminating bool
}

// Node returns the endpoint's node name, "" when unset.
func (e *SliceEndpoint) Node() string { return valueOf(e.nodeName) }

// Zone returns the endpoint's zone, "" when unset.
func (e *SliceEndpoint) Zone() string { return valueOf(e.zone) }

func valueOf(h unique.Handle[string]) string {
	if h == (unique.Handle[string]{}) {
		return ""
	}
	return h.Value()
}

// NewEndpointSlice converts s. The result shares s's ports and hints, which must not be
// modified afterwards.
func NewEndpointSlice(s *discovery.EndpointSlice) *EndpointSlice {
	out := &EndpointSlice{
		Namespace: s.Namespace, Name: s.Name, ResourceVersion: s.ResourceVersion, UID: s.UID,
		Service: s.Labels[discovery.LabelServiceName], AddressType: s.AddressType, Ports: s.Ports,
	}
	_, out.Headless = s.Labels[v1.IsHeadlessService]
	if raw := s.Annotations[v1.EndpointsLastChangeTriggerTime]; raw != "" {
		if ts, err := time.Parse(time.RFC3339Nano, raw); err == nil {
			out.TriggerTime = ts
		} else {
			out.BadTriggerTime = raw
		}
	}
	if len(s.Endpoints) > 0 {
		out.Endpoints = make([]SliceEndpoint, len(s.Endpoints))
	}
	for i := range s.Endpoints {
		e := &s.Endpoints[i]
		c := &e.Conditions
		ready := c.Ready == nil || *c.Ready
		se := SliceEndpoint{Ready: ready, Serving: ready, Terminating: c.Terminating != nil && *c.Terminating}
		if c.Serving != nil {
			se.Serving = *c.Serving
		}
		if len(e.Addresses) > 0 {
			se.Addr, _ = parseAddr(e.Addresses[0])
		}
		if e.NodeName != nil {
			se.nodeName = unique.Make(*e.NodeName)
		}
		if e.Zone != nil {
			se.zone = unique.Make(*e.Zone)
		}
		if e.Hints != nil {
			if out.Hints == nil {
				out.Hints = make([]*discovery.EndpointHints, len(s.Endpoints))
			}
			out.Hints[i] = e.Hints
		}
		out.Endpoints[i] = se
	}
	return out
}

// HintsOf returns endpoint i's topology hints, nil when it has none.
func (s *EndpointSlice) HintsOf(i int) *discovery.EndpointHints {
	if s.Hints == nil {
		return nil
	}
	return s.Hints[i]
}

// GetObjectKind implements runtime.Object: the kind is not kept.
func (*EndpointSlice) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object.
func (s *EndpointSlice) DeepCopyObject() runtime.Object {
	c := *s
	if s.Ports != nil {
		c.Ports = make([]discovery.EndpointPort, len(s.Ports))
		for i := range s.Ports {
			s.Ports[i].DeepCopyInto(&c.Ports[i])
		}
	}
	if s.Endpoints != nil {
		c.Endpoints = append([]SliceEndpoint(nil), s.Endpoints...)
	}
	if s.Hints != nil {
		c.Hints = make([]*discovery.EndpointHints, len(s.Hints))
		for i, h := range s.Hints {
			c.Hints[i] = h.DeepCopy()
		}
	}
	return &c
}

// GetObjectMeta implements metav1.ObjectMetaAccessor, for the informer's keys, resync checks
// and consistency detector: the namespace, name, uid and resourceVersion.
func (s *EndpointSlice) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, UID: s.UID, ResourceVersion: s.ResourceVersion}
}

// Same reports whether s and o are the same for the proxier: address type, ports and endpoints
// (not the name, Service or trigger time).
func (s *EndpointSlice) Same(o *EndpointSlice) bool {
	if s.AddressType != o.AddressType || len(s.Endpoints) != len(o.Endpoints) || len(s.Ports) != len(o.Ports) {
		return false
	}
	if !equality.Semantic.DeepEqual(s.Ports, o.Ports) {
		return false
	}
	for i := range s.Endpoints {
		a, b := &s.Endpoints[i], &o.Endpoints[i]
		if a.Addr != b.Addr || a.nodeName != b.nodeName || a.zone != b.zone || a.Ready != b.Ready ||
			a.Serving != b.Serving || a.Terminating != b.Terminating || !sameHints(s.HintsOf(i), o.HintsOf(i)) {
			return false
		}
	}
	return true
}

func sameHints(a, b *discovery.EndpointHints) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a == b || equality.Semantic.DeepEqual(a, b)
}
