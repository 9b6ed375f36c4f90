package loadbalancer

import (
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/antrea-proxy/antrea-proxy/pkg/lbapi"
	c "github.com/antrea-proxy/antrea-proxy/pkg/loadbalancer/conditions"
)

var (
	serving      = condSummary{"True", c.ReasonServing}
	complete     = condSummary{"False", c.ReasonComplete}
	provisioning = condSummary{"True", c.ReasonProvisioning}
)

func notServing(reason string) condSummary { return condSummary{"False", reason} }
func degraded(reason string) condSummary   { return condSummary{"True", reason} }

func withAnn(k, v string) func(*v1.Service) { return func(s *v1.Service) { s.Annotations[k] = v } }
func withPool(p string) func(*v1.Service)   { return withAnn(lbapi.AnnotationPool, p) }
func requiring(fs ...c.Feature) func(*v1.Service) {
	return withAnn(lbapi.AnnotationRequiredFeatures, c.FormatFeatures(fs))
}
func etpLocal(s *v1.Service)         { s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal }
func clientIPAffinity(s *v1.Service) { s.Spec.SessionAffinity = v1.ServiceAffinityClientIP }
func dualStack(policy v1.IPFamilyPolicy) func(*v1.Service) {
	return func(s *v1.Service) {
		s.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
		s.Spec.IPFamilyPolicy = &policy
	}
}

func TestSyncOutcomes(t *testing.T) {
	nodes := []runtime.Object{readyNode("node-a", nil), readyNode("node-b", nil), notReadyNode("node-c")}
	for _, tc := range []struct {
		name      string
		svc       *v1.Service
		objs      []runtime.Object
		ips       []string
		mode      v1.LoadBalancerIPMode
		conds     map[string]condSummary
		msg       string // substring of the Serving (or Degraded, if set) message
		announced string // announcing-node annotation; "" means absent
	}{{
		name: "VIP address announced by a Ready node",
		svc:  lbService("s"), ips: []string{"10.0.0.1"}, mode: v1.LoadBalancerIPModeVIP,
		conds:     map[string]condSummary{c.TypeServing: serving, c.TypeProvisioning: complete},
		msg:       "serving 10.0.0.1 (VIP, announced by node-a)",
		announced: "10.0.0.1=node-a",
	}, {
		name: "dual-stack gets one address per family",
		svc:  lbService("s", dualStack(v1.IPFamilyPolicyRequireDualStack)), ips: []string{"10.0.0.1", "fd00::1"},
		mode:  v1.LoadBalancerIPModeVIP,
		conds: map[string]condSummary{c.TypeServing: serving, c.TypeProvisioning: complete},
	}, {
		name: "SingleStack uses only the first family",
		svc: lbService("s", dualStack(v1.IPFamilyPolicySingleStack), func(s *v1.Service) {
			s.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol, v1.IPv4Protocol}
		}),
		ips: []string{"fd00::1"}, mode: v1.LoadBalancerIPModeVIP,
		conds: map[string]condSummary{c.TypeServing: serving, c.TypeProvisioning: complete},
	}, {
		name: "spec.loadBalancerIP is honoured",
		svc:  lbService("s", func(s *v1.Service) { s.Spec.LoadBalancerIP = "10.0.0.2" }), ips: []string{"10.0.0.2"},
		mode:  v1.LoadBalancerIPModeVIP,
		conds: map[string]condSummary{c.TypeServing: serving, c.TypeProvisioning: complete},
	}, {
		name: "requested IPs annotation is honoured",
		svc: lbService("s", dualStack(v1.IPFamilyPolicyPreferDualStack),
			withAnn(lbapi.AnnotationLoadBalancerIPs, "fd00::2, 10.0.0.2"), requiring(c.FeatureLoadBalancerIP)),
		ips: []string{"10.0.0.2", "fd00::2"}, mode: v1.LoadBalancerIPModeVIP,
		conds: map[string]condSummary{c.TypeServing: serving, c.TypeProvisioning: complete},
	}, {
		name: "Proxy pool selected by annotation",
		svc:  lbService("s", withPool("proxy")), ips: []string{"192.0.2.1"}, mode: v1.LoadBalancerIPModeProxy,
		conds: map[string]condSummary{c.TypeServing: serving, c.TypeProvisioning: complete},
		msg:   "serving 192.0.2.1 (Proxy)",
	}, {
		name: "eTP=Local on a Proxy pool is degraded",
		svc:  lbService("s", withPool("proxy"), etpLocal), ips: []string{"192.0.2.1"}, mode: v1.LoadBalancerIPModeProxy,
		conds: map[string]condSummary{c.TypeServing: serving, c.TypeProvisioning: complete,
			c.TypeDegraded: degraded(c.ReasonExternalTrafficPolicyNotSupported)},
		msg: "does not preserve the client source IP",
	}, {
		name: "several unmet features are degraded with Multiple",
		svc:  lbService("s", withPool("proxy"), etpLocal, clientIPAffinity), ips: []string{"192.0.2.1"},
		mode: v1.LoadBalancerIPModeProxy,
		conds: map[string]condSummary{c.TypeServing: serving, c.TypeProvisioning: complete,
			c.TypeDegraded: degraded(c.ReasonMultiple)},
		msg: "ExternalTrafficPolicy: ipMode Proxy address 192.0.2.1 is reached through an external proxy, which does not preserve the client source IP; SessionAffinity:",
	}, {
		name: "required ExternalTrafficPolicy on a Proxy pool is unsupported",
		svc:  lbService("s", withPool("proxy"), etpLocal, requiring(c.FeatureExternalTrafficPolicy)), ips: []string{},
		conds: map[string]condSummary{c.TypeServing: notServing(c.ReasonUnsupported), c.TypeProvisioning: complete},
		msg:   "unsupported: ExternalTrafficPolicy: ipMode Proxy address 192.0.2.1",
	}, {
		name: "required SessionAffinity on a Proxy pool is unsupported",
		svc:  lbService("s", withPool("proxy"), clientIPAffinity, requiring(c.FeatureSessionAffinity)), ips: []string{},
		conds: map[string]condSummary{c.TypeServing: notServing(c.ReasonUnsupported), c.TypeProvisioning: complete},
		msg:   "unsupported: SessionAffinity:",
	}, {
		name: "loadBalancerSourceRanges on a Proxy pool are unsupported",
		svc: lbService("s", withPool("proxy"), func(s *v1.Service) {
			s.Spec.LoadBalancerSourceRanges = []string{"203.0.113.0/24"}
		}),
		ips:   []string{},
		conds: map[string]condSummary{c.TypeServing: notServing(c.ReasonUnsupported), c.TypeProvisioning: complete},
		msg:   "unsupported: LoadBalancerSourceRanges: ipMode Proxy address 192.0.2.1 is reached through an external proxy, so source ranges cannot be enforced",
	}, {
		name: "loadBalancerSourceRanges on a Proxy pool whose proxy enforces them are served",
		svc: lbService("s", withPool("proxy-ranges"), func(s *v1.Service) {
			s.Spec.LoadBalancerSourceRanges = []string{"203.0.113.0/24"}
		}),
		ips: []string{"192.0.2.9"}, mode: v1.LoadBalancerIPModeProxy,
		conds: map[string]condSummary{c.TypeServing: serving, c.TypeProvisioning: complete},
	}, {
		name: "loadBalancerIP outside the pools is degraded",
		svc:  lbService("s", func(s *v1.Service) { s.Spec.LoadBalancerIP = "198.51.100.7" }), ips: []string{"10.0.0.1"},
		mode: v1.LoadBalancerIPModeVIP,
		conds: map[string]condSummary{c.TypeServing: serving, c.TypeProvisioning: complete,
			c.TypeDegraded: degraded(c.ReasonLoadBalancerIPNotSupported)},
		msg: "LoadBalancerIP: requested address 198.51.100.7 is not in any pool",
	}, {
		name: "required LoadBalancerIP outside the pools is unsupported",
		svc: lbService("s", func(s *v1.Service) { s.Spec.LoadBalancerIP = "198.51.100.7" },
			requiring(c.FeatureLoadBalancerIP)), ips: []string{},
		conds: map[string]condSummary{c.TypeServing: notServing(c.ReasonUnsupported), c.TypeProvisioning: complete},
		msg:   "unsupported: LoadBalancerIP: requested address 198.51.100.7 is not in any pool",
	}, {
		name: "malformed requested IPs are unsupported",
		svc:  lbService("s", withAnn(lbapi.AnnotationLoadBalancerIPs, "10.0.0.300")), ips: []string{},
		conds: map[string]condSummary{c.TypeServing: notServing(c.ReasonUnsupported), c.TypeProvisioning: complete},
		msg:   `LoadBalancerIP: annotation antrea-proxy.io/load-balancer-ips: not an IP address: "10.0.0.300"`,
	}, {
		name: "dual-stack on an IPv4-only pool is degraded",
		svc:  lbService("s", withPool("proxy"), dualStack(v1.IPFamilyPolicyPreferDualStack)), ips: []string{"192.0.2.1"},
		mode: v1.LoadBalancerIPModeProxy,
		conds: map[string]condSummary{c.TypeServing: serving, c.TypeProvisioning: complete,
			c.TypeDegraded: degraded(c.ReasonIPFamiliesNotSupported)},
		msg: `IPFamilies: pool "proxy" has no IPv6 addresses`,
	}, {
		name: "required IPFamilies on an IPv4-only pool is unsupported",
		svc: lbService("s", withPool("proxy"), dualStack(v1.IPFamilyPolicyRequireDualStack),
			requiring(c.FeatureIPFamilies)), ips: []string{},
		conds: map[string]condSummary{c.TypeServing: notServing(c.ReasonUnsupported), c.TypeProvisioning: complete},
		msg:   `unsupported: IPFamilies: pool "proxy" has no IPv6 addresses`,
	}, {
		name:  "IPv6-only on an IPv4-only pool is unsupported even when not required",
		svc:   lbService("s", withPool("proxy"), func(s *v1.Service) { s.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol} }),
		ips:   []string{},
		conds: map[string]condSummary{c.TypeServing: notServing(c.ReasonUnsupported), c.TypeProvisioning: complete},
	}, {
		name: "required features that are met",
		svc: lbService("s", etpLocal, clientIPAffinity, requiring(c.AllFeatures()...), func(s *v1.Service) {
			s.Spec.LoadBalancerSourceRanges = []string{"203.0.113.0/24"}
		}),
		objs: []runtime.Object{endpointSlice("s", "s-1", "node-a")},
		ips:  []string{"10.0.0.1"}, mode: v1.LoadBalancerIPModeVIP,
		conds:     map[string]condSummary{c.TypeServing: serving, c.TypeProvisioning: complete},
		announced: "10.0.0.1=node-a",
	}, {
		name: "unknown required feature is unsupported",
		svc:  lbService("s", requiring("Teleport")), ips: []string{},
		conds: map[string]condSummary{c.TypeServing: notServing(c.ReasonUnsupported), c.TypeProvisioning: complete},
		msg:   "unsupported: Teleport: unknown feature",
	}, {
		name: "unknown pool is an infrastructure failure",
		svc:  lbService("s", withPool("nope")), ips: []string{},
		conds: map[string]condSummary{c.TypeServing: notServing(c.ReasonInfrastructure), c.TypeProvisioning: complete},
		msg:   `pool "nope" (annotation) is not configured`,
	}, {
		name: "no node matches the pool's selector: provisioning",
		svc:  lbService("s", withPool("sel")), ips: []string{"10.0.1.1"}, mode: v1.LoadBalancerIPModeVIP,
		conds: map[string]condSummary{c.TypeServing: notServing(c.ReasonProvisioning), c.TypeProvisioning: provisioning},
		msg:   `waiting for a Ready node matching the nodeSelector of pool "sel" to announce 10.0.1.1`,
	}, {
		name: "eTP=Local without a local endpoint: provisioning",
		svc:  lbService("s", etpLocal), ips: []string{"10.0.0.1"}, mode: v1.LoadBalancerIPModeVIP,
		objs:  []runtime.Object{endpointSlice("other", "o-1", "node-a")},
		conds: map[string]condSummary{c.TypeServing: notServing(c.ReasonProvisioning), c.TypeProvisioning: provisioning},
		msg:   "waiting for a Ready node with a ready local endpoint (externalTrafficPolicy=Local) to announce 10.0.0.1",
	}, {
		name: "eTP=Local is announced by the node of the endpoint",
		svc:  lbService("s", etpLocal), ips: []string{"10.0.0.1"}, mode: v1.LoadBalancerIPModeVIP,
		objs:      []runtime.Object{endpointSlice("s", "s-1", "node-a", "node-c")},
		conds:     map[string]condSummary{c.TypeServing: serving, c.TypeProvisioning: complete},
		announced: "10.0.0.1=node-a",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testPools(), append(append([]runtime.Object{}, nodes...), tc.objs...)...)
			h.create(tc.svc)
			svc := h.sync("s")
			require.Equal(t, tc.ips, ingressIPs(svc))
			for _, ing := range svc.Status.LoadBalancer.Ingress {
				require.Equal(t, tc.mode, *ing.IPMode)
				require.Equal(t, []v1.PortStatus{{Port: 80, Protocol: v1.ProtocolTCP}}, ing.Ports)
			}
			require.Equal(t, tc.conds, condsOf(svc))
			if tc.msg != "" {
				typ := c.TypeServing
				if _, ok := tc.conds[c.TypeDegraded]; ok {
					typ = c.TypeDegraded
				}
				for _, cond := range svc.Status.Conditions {
					if cond.Type == typ {
						require.Contains(t, cond.Message, tc.msg)
					}
				}
			}
			for _, cond := range svc.Status.Conditions {
				require.Equal(t, int64(1), cond.ObservedGeneration, cond.Type)
				require.True(t, cond.LastTransitionTime.Time.Equal(t0), cond.Type)
			}
			require.Contains(t, svc.Finalizers, lbapi.Finalizer)
			ann, has := svc.Annotations[lbapi.AnnotationAnnouncingNode]
			if tc.announced != "" || tc.mode == v1.LoadBalancerIPModeProxy {
				require.Equal(t, tc.announced, ann)
				require.Equal(t, tc.announced != "", has)
			}
			if tc.mode == v1.LoadBalancerIPModeVIP && len(tc.ips) > 0 && tc.conds[c.TypeServing] == serving {
				for _, ip := range tc.ips {
					require.Contains(t, ann, ip+"=node-")
				}
				require.NotContains(t, ann, "node-c", "a NotReady node never announces")
			}
			// A second sync writes nothing.
			before := h.writes()
			again := h.sync("s")
			require.Equal(t, svc.ResourceVersion, again.ResourceVersion)
			require.Equal(t, before, h.writes())
		})
	}
}
