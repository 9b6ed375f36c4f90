package agent

import (
	"encoding/binary"
	"strings"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
)

// Bounds of the sharer's tables. Their entries stay once added (a deleted object's values
// included), so both their number and their size are bounded, whoever writes the objects: a
// table holds at most maxShared entries, of strings of at most maxSharedString bytes and lists
// whose encoding is at most maxSharedList bytes (a few ports; port names are at most 15
// characters). A longer value, or one arriving once its table is full, is kept as decoded.
const (
	maxShared       = 1 << 12
	maxSharedString = 64
	maxSharedList   = 256
)

// boundedTable maps a value to its shared copy and keeps at most max entries.
type boundedTable[K comparable, V any] struct {
	m   map[K]V
	max int
}

// share returns the copy shared under k, v itself (then shared) when there is none, or v
// unshared when the table is full.
func (t *boundedTable[K, V]) share(k K, v V) V {
	if c, ok := t.m[k]; ok {
		return c
	}
	if len(t.m) < t.max {
		if t.m == nil {
			t.m = make(map[K]V)
		}
		t.m[k] = v
	}
	return v
}

// sharer gives the values that many Services and EndpointSlices repeat (their enum-like
// strings, optional enums, IP family lists and port lists) one shared copy each, so that the
// informer caches hold them once instead of once an object: every decoded string, pointer and
// slice is a heap object the runtime's collection marks, and at 30,000 Services these were a
// third of the agent's heap objects. The shared values are read-only, as every informer
// object is after the transform. Not safe for concurrent use: the trimmer serialises it.
type sharer struct {
	strs          boundedTable[string, string]
	strPtrs       boundedTable[string, *string]
	protocols     boundedTable[v1.Protocol, *v1.Protocol]
	familyPolicy  boundedTable[v1.IPFamilyPolicy, *v1.IPFamilyPolicy]
	trafficPolicy boundedTable[v1.ServiceInternalTrafficPolicy, *v1.ServiceInternalTrafficPolicy]
	ipModes       boundedTable[v1.LoadBalancerIPMode, *v1.LoadBalancerIPMode]
	families      boundedTable[string, []v1.IPFamily]
	svcPorts      boundedTable[string, []v1.ServicePort]
	slicePorts    boundedTable[string, []discovery.EndpointPort]
}

func newSharer(max int) *sharer {
	s := &sharer{}
	s.strs.max, s.strPtrs.max, s.protocols.max, s.familyPolicy.max = max, max, max, max
	s.trafficPolicy.max, s.ipModes.max, s.families.max, s.svcPorts.max, s.slicePorts.max = max, max, max, max, max
	return s
}

// service shares what o repeats of other Services: its type, affinity and traffic policies,
// IP families, port list (or its ports' names and protocols), load balancer ipModes, and its
// first cluster IP with spec.clusterIP; its name, uid and resourceVersion become one string.
func (s *sharer) service(o *v1.Service) {
	spec := &o.Spec
	spec.Type = shareString(s, spec.Type)
	spec.SessionAffinity = shareString(s, spec.SessionAffinity)
	spec.ExternalTrafficPolicy = shareString(s, spec.ExternalTrafficPolicy)
	spec.InternalTrafficPolicy = sharePtr(s, &s.trafficPolicy, spec.InternalTrafficPolicy)
	spec.IPFamilyPolicy = sharePtr(s, &s.familyPolicy, spec.IPFamilyPolicy)
	spec.TrafficDistribution = sharePtr(s, &s.strPtrs, spec.TrafficDistribution)
	spec.LoadBalancerClass = sharePtr(s, &s.strPtrs, spec.LoadBalancerClass)
	if len(spec.ClusterIPs) > 0 && spec.ClusterIPs[0] == spec.ClusterIP {
		spec.ClusterIPs[0] = spec.ClusterIP
	}
	if key, ok := listKey(spec.IPFamilies); ok {
		for i := range spec.IPFamilies {
			spec.IPFamilies[i] = shareString(s, spec.IPFamilies[i])
		}
		spec.IPFamilies = s.families.share(key, spec.IPFamilies)
	}
	spec.Ports = s.servicePorts(spec.Ports)
	for i := range o.Status.LoadBalancer.Ingress {
		ing := &o.Status.LoadBalancer.Ingress[i]
		ing.IPMode = sharePtr(s, &s.ipModes, ing.IPMode)
	}
	uid := string(o.UID)
	packStrings(&o.Name, &uid, &o.ResourceVersion)
	o.UID = types.UID(uid)
}

// servicePorts returns the shared copy of ps, or ps with its ports' strings shared.
func (s *sharer) servicePorts(ps []v1.ServicePort) []v1.ServicePort {
	key, ok := listKey(ps)
	if c, found := s.svcPorts.m[key]; ok && found {
		return c // no table holds the empty key
	}
	for i := range ps {
		p := &ps[i]
		p.Name, p.Protocol = shareString(s, p.Name), shareString(s, p.Protocol)
		p.TargetPort.StrVal = shareString(s, p.TargetPort.StrVal)
		p.AppProtocol = sharePtr(s, &s.strPtrs, p.AppProtocol)
	}
	if !ok {
		return ps
	}
	return s.svcPorts.share(key, ps)
}

// slice shares what o repeats of other EndpointSlices: its port list (or its ports' names and
// protocols); its name, Service, uid and resourceVersion become one string.
func (s *sharer) slice(o *model.EndpointSlice) {
	key, ok := listKey(o.Ports)
	if c, found := s.slicePorts.m[key]; ok && found {
		o.Ports = c
	} else {
		for i := range o.Ports {
			p := &o.Ports[i]
			p.Name, p.AppProtocol = sharePtr(s, &s.strPtrs, p.Name), sharePtr(s, &s.strPtrs, p.AppProtocol)
			p.Protocol = sharePtr(s, &s.protocols, p.Protocol)
		}
		if ok {
			o.Ports = s.slicePorts.share(key, o.Ports)
		}
	}
	uid := string(o.UID)
	packStrings(&o.Name, &o.Service, &uid, &o.ResourceVersion)
	o.UID = types.UID(uid)
}

// shareString returns the shared copy of v ("" and values longer than maxSharedString as
// they are).
func shareString[T ~string](s *sharer, v T) T {
	if v == "" || len(v) > maxSharedString {
		return v
	}
	return T(s.strs.share(string(v), string(v)))
}

// sharePtr returns the shared pointer to *p's value (nil as it is), itself pointing at the
// shared copy of the string.
func sharePtr[T ~string](s *sharer, t *boundedTable[T, *T], p *T) *T {
	if p == nil || len(*p) > maxSharedString {
		return p
	}
	if c, ok := t.m[*p]; ok {
		return c
	}
	*p = shareString(s, *p)
	return t.share(*p, p)
}

// listKey encodes a non-empty list (of API structs, with protobuf, or of strings) into the key
// that equal lists share: false when it is empty or its encoding is longer than maxSharedList.
// Protobuf tells a nil optional field from a zero one, so lists with the same key are
// semantically equal.
func listKey[L ~[]E, E any](list L) (string, bool) {
	if len(list) == 0 {
		return "", false
	}
	var b []byte
	for i := range list {
		var raw []byte
		switch e := any(&list[i]).(type) {
		case *v1.IPFamily:
			raw = []byte(*e)
		case interface{ Marshal() ([]byte, error) }:
			var err error
			if raw, err = e.Marshal(); err != nil {
				return "", false
			}
		default:
			return "", false
		}
		b = binary.AppendUvarint(b, uint64(len(raw)))
		if b = append(b, raw...); len(b) > maxSharedList {
			return "", false
		}
	}
	return string(b), true
}

// packStrings moves the strings into one allocation: one heap object instead of one each, for
// values that live and die together (an object's name, uid and resourceVersion).
func packStrings(fields ...*string) {
	n := 0
	for _, f := range fields {
		n += len(*f)
	}
	var b strings.Builder
	b.Grow(n)
	for _, f := range fields {
		b.WriteString(*f)
	}
	all := b.String()
	for _, f := range fields {
		*f, all = all[:len(*f)], all[len(*f):]
	}
}
