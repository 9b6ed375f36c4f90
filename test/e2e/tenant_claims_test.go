//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// claimVariant is one way an attacker's Service claims a victim's ClusterIP tuple through its
// externalIPs: each changes which flows the claim would need.
type claimVariant struct {
	name  string
	shape func(svc *corev1.Service) *corev1.Service
}

// claimVariants: a plain ClusterIP Service, externalTrafficPolicy=Local, ClientIP session
// affinity, and a LoadBalancer Service whose loadBalancerSourceRanges admit nobody in the
// sandbox (a claim that won would then drop the victim's clients).
func claimVariants() []claimVariant {
	return []claimVariant{
		{"Plain", func(svc *corev1.Service) *corev1.Service { return svc }},
		{"ExternalTrafficPolicyLocal", func(svc *corev1.Service) *corev1.Service {
			svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
			return svc
		}},
		{"SessionAffinityClientIP", func(svc *corev1.Service) *corev1.Service {
			svc.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
			return svc
		}},
		{"LoadBalancerSourceRanges", func(svc *corev1.Service) *corev1.Service {
			manualLB(svc).Spec.LoadBalancerSourceRanges = []string{"203.0.113.0/24"}
			return svc
		}},
	}
}

// claimPair is one attack: the victim's ClusterIP Service and the attacker's Service in another
// namespace with externalIPs [the victim's ClusterIP] on the same port.
type claimPair struct {
	variant          claimVariant
	attackerFirst    bool
	victim, attacker *corev1.Service
}

func (p claimPair) name() string {
	if p.attackerFirst {
		return p.variant.name + "/AttackerFirst"
	}
	return p.variant.name + "/VictimFirst"
}

// Namespaces of TestTenantClaimOwnership. "claim-attacker" sorts before "claim-victim": an
// ownership decided by the namespace/name order on equal creationTimestamps would go to the
// attacker.
const (
	victimNS   = "claim-victim"
	attackerNS = "claim-attacker"
	claimPort  = 80
)

// attackerFirstIPs are the ClusterIPs of the victims created after their attackers: the
// attackers claim them before any Service holds them.
var attackerFirstIPs = netip.MustParsePrefix("10.96.201.0/24")

// TestTenantClaimOwnership: a Service in one namespace cannot take the ClusterIP tuple
// (address, protocol, port) of a Service in another one by listing that ClusterIP in its
// externalIPs, in any variant (plain, eTP=Local, ClientIP affinity, a LoadBalancer with
// source ranges) and whichever Service is older: 12 connections from a pod on each node to the
// victim's ClusterIP:port are all answered by the victim's backends, and the attacker's
// servicemap rows show the refused claim: FlowConflict (the tuple is another Service's) or
// AddressRefused (an agent that knows the ServiceCIDRs refuses an externalIP inside one).
func TestTenantClaimOwnership(t *testing.T) {
	sb := framework.StartSandbox(t, framework.SandboxOptions{Agent: framework.AgentOptions{ProxyLoadBalancerIPs: true}})
	ctx := context.Background()
	for _, ns := range []string{victimNS, attackerNS} {
		require.NoError(t, sb.CreateNamespace(ctx, ns))
	}
	n1, n2 := sb.Nodes[0], sb.Nodes[1]
	pods, err := sb.RunPods(ctx,
		framework.EchoPod(victimNS, "victim-1", n1, map[string]string{"app": "victim"}),
		framework.EchoPod(victimNS, "victim-2", n2, map[string]string{"app": "victim"}),
		framework.EchoPod(attackerNS, "attacker-1", n1, map[string]string{"app": "attacker"}),
		framework.EchoPod(attackerNS, "attacker-2", n2, map[string]string{"app": "attacker"}),
		framework.EchoPod(victimNS, "client-1", n1, map[string]string{"app": "client"}),
		framework.EchoPod(victimNS, "client-2", n2, map[string]string{"app": "client"}),
	)
	require.NoError(t, err)
	victimIPs := []string{pods[0].Status.PodIP, pods[1].Status.PodIP}
	clients := map[string]*framework.NetNS{}
	for _, p := range pods[4:] {
		ns, err := sb.PodNetNS(p)
		require.NoError(t, err)
		clients["pod on "+p.Spec.NodeName] = ns
	}

	pairs := createClaimPairs(t, sb)
	for _, p := range pairs {
		require.NoError(t, sb.WaitEndpoints(ctx, victimNS, p.victim.Name, victimIPs...))
	}
	for _, p := range pairs {
		t.Run(p.name(), func(t *testing.T) {
			require.NoError(t, sb.WaitProgrammed(ctx, victimNS, p.victim.Name, "with both endpoints", framework.HasEndpoints(2)))
			require.NoError(t, checkEachNode(sb, attackerNS, p.attacker.Name, time.Minute, anyRows), "the attacker's Service is never synced")
			addr := hostPort(p.victim.Spec.ClusterIP, claimPort)
			victims := map[string]bool{"victim-1": true, "victim-2": true}
			promise := fmt.Sprintf("the ClusterIP tuple %s/TCP of %s/%s belongs to it, not to %s/%s (externalIPs, %s)",
				addr, victimNS, p.victim.Name, attackerNS, p.attacker.Name, p.name())
			for _, who := range []string{"pod on " + n2.Name, "pod on " + n1.Name} {
				requireAnsweredBy(t, clients[who], addr, 12, victims, promise+", from the "+who)
			}
			// FlowConflict: the tuple is the victim's; AddressRefused: an externalIP inside the
			// ServiceCIDR is refused whoever holds it (also before the victim exists).
			require.NoError(t, checkEachNode(sb, attackerNS, p.attacker.Name, 10*time.Second, framework.HasProblem(reasonFlowConflict, reasonAddressRefused)),
				"the attacker's refused claim must show in its servicemap rows")
			require.NoError(t, checkEachNode(sb, victimNS, p.victim.Name, 10*time.Second, framework.NoProblem()),
				"the victim is programmed as it asks")
		})
	}
}

// createClaimPairs creates, for every variant, a victim-first and an attacker-first pair, each
// later Service created in a later second than the ones it must not win over: first the
// attacker-first attackers (claiming addresses of attackerFirstIPs), then every victim (the
// attacker-first ones with those addresses), then the victim-first attackers.
func createClaimPairs(t *testing.T, sb *framework.Sandbox) []claimPair {
	var pairs []claimPair
	ip := attackerFirstIPs.Addr()
	var last metav1.Time
	for _, v := range claimVariants() {
		ip = ip.Next()
		holder, err := sb.ServiceHolding(context.Background(), ip)
		require.NoError(t, err)
		require.Empty(t, holder, "the address the attacker claims first must be unallocated")
		p := claimPair{variant: v, attackerFirst: true}
		p.attacker = createService(t, sb, attackerService(v, "first-"+slug(v.name), ip))
		last = p.attacker.CreationTimestamp
		pairs = append(pairs, p)
	}
	waitClockPast(t, last)
	for i := range pairs {
		victim := tcpService(victimNS, "first-"+slug(pairs[i].variant.name), "victim", corev1.ServiceTypeClusterIP, claimPort)
		victim.Spec.ClusterIP = pairs[i].attacker.Spec.ExternalIPs[0]
		pairs[i].victim = createService(t, sb, victim)
	}
	for _, v := range claimVariants() {
		p := claimPair{variant: v}
		p.victim = createService(t, sb, tcpService(victimNS, "later-"+slug(v.name), "victim", corev1.ServiceTypeClusterIP, claimPort))
		last = p.victim.CreationTimestamp
		pairs = append(pairs, p)
	}
	waitClockPast(t, last)
	for i := range pairs {
		if pairs[i].attackerFirst {
			continue
		}
		v := pairs[i].variant
		pairs[i].attacker = createService(t, sb, attackerService(v, "later-"+slug(v.name), netip.MustParseAddr(pairs[i].victim.Spec.ClusterIP)))
	}
	return pairs
}

// attackerService is the attacker's Service of variant v claiming ip:claimPort/TCP.
func attackerService(v claimVariant, name string, ip netip.Addr) *corev1.Service {
	svc := tcpService(attackerNS, name, "attacker", corev1.ServiceTypeClusterIP, claimPort)
	svc.Spec.ExternalIPs = []string{ip.String()}
	return v.shape(svc)
}

// slug is a variant name as a DNS label part: "ExternalTrafficPolicyLocal" -> "externaltrafficpolicylocal".
func slug(name string) string {
	b := []byte(name)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
