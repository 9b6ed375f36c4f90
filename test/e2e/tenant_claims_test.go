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

// claimPair is one attack: the victim's Service and the attacker's Service in another namespace
// claiming the victim's tuple through its externalIPs, on the same port.
type claimPair struct {
	variant claimVariant
	order   claimOrder
	// victim, attacker as the API server returned them.
	victim, attacker *corev1.Service
}

// claimOrder says which tuple of the victim is claimed and which Service is older.
type claimOrder int

const (
	// victimFirst: the attacker claims the victim's ClusterIP tuple in a later second.
	victimFirst claimOrder = iota
	// attackerFirst: the attacker claims an address no Service holds; the victim gets it as
	// its ClusterIP in a later second.
	attackerFirst
	// externalFirst: the attacker claims the victim's externalIP tuple (outside the
	// ServiceCIDR) in a later second: the older external claim owns it.
	externalFirst
)

func (p claimPair) name() string {
	return p.variant.name + "/" + [...]string{"VictimFirst", "AttackerFirst", "ExternalIPVictimFirst"}[p.order]
}

// target is the victim's claimed tuple's address.
func (p claimPair) target() string {
	if p.order == externalFirst {
		return p.victim.Spec.ExternalIPs[0]
	}
	return p.victim.Spec.ClusterIP
}

// refusals are the problems the attacker's refused claim may show: FlowConflict (the tuple is
// another Service's) or, for a ClusterIP, AddressRefused (an agent that knows the ServiceCIDRs
// refuses an externalIP inside one, whoever holds it, also before the victim exists).
func (p claimPair) refusals() []string {
	if p.order == externalFirst {
		return []string{reasonFlowConflict}
	}
	return []string{reasonFlowConflict, reasonAddressRefused}
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
// attackers claim them before any Service holds them. victimExternalIPs are the externalIPs of
// the victims of externalFirst pairs (in the VIP range, which the sandbox routes to node1).
var (
	attackerFirstIPs  = netip.MustParsePrefix("10.96.201.0/24")
	victimExternalIPs = netip.MustParsePrefix("172.18.0.200/29")
)

// TestTenantClaimOwnership: a Service in one namespace cannot take the ClusterIP tuple
// (address, protocol, port) of a Service in another one by listing that ClusterIP in its
// externalIPs, in any variant (plain, eTP=Local, ClientIP affinity, a LoadBalancer with
// source ranges) and whichever Service is older; nor, being newer, the victim's externalIP
// tuple. 12 connections from a pod on each node to the victim's tuple are all answered by the
// victim's backends, and the attacker's servicemap rows show the refused claim (claimPair's
// refusals).
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
			require.NoError(t, sb.WaitProgrammed(ctx, attackerNS, p.attacker.Name, "(listed)", anyRows))
			addr := hostPort(p.target(), claimPort)
			victims := map[string]bool{"victim-1": true, "victim-2": true}
			promise := fmt.Sprintf("the tuple %s/TCP of %s/%s belongs to it, not to %s/%s (externalIPs, %s)",
				addr, victimNS, p.victim.Name, attackerNS, p.attacker.Name, p.name())
			for _, who := range []string{"pod on " + n2.Name, "pod on " + n1.Name} {
				requireAnsweredBy(t, clients[who], addr, 12, victims, promise+", from the "+who)
			}
			require.NoError(t, sb.WaitProgrammedWithin(ctx, 10*time.Second, attackerNS, p.attacker.Name, "with its claim refused", framework.HasProblem(p.refusals()...)),
				"the attacker's refused claim must show in its servicemap rows")
			logProblem(t, n1, attackerNS, p.attacker.Name)
			require.NoError(t, sb.WaitProgrammedWithin(ctx, 10*time.Second, victimNS, p.victim.Name, "without a problem", framework.NoProblem()),
				"the victim is programmed as it asks")
		})
	}
}

// createClaimPairs creates, for every variant, a pair of each claimOrder, each later Service
// created in a later second than the ones it must not win over: first the attacker-first
// attackers (claiming addresses of attackerFirstIPs), then every victim (the attacker-first
// ones with those addresses as ClusterIPs, the external-first ones with an externalIP of
// victimExternalIPs), then the other attackers.
func createClaimPairs(t *testing.T, sb *framework.Sandbox) []claimPair {
	var pairs []claimPair
	ip, ext := attackerFirstIPs.Addr(), victimExternalIPs.Addr()
	var last metav1.Time
	for _, v := range claimVariants() {
		ip = ip.Next()
		holder, err := sb.ServiceHolding(context.Background(), ip)
		require.NoError(t, err)
		require.Empty(t, holder, "the address the attacker claims first must be unallocated")
		p := claimPair{variant: v, order: attackerFirst}
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
		p := claimPair{variant: v, order: victimFirst}
		p.victim = createService(t, sb, tcpService(victimNS, "later-"+slug(v.name), "victim", corev1.ServiceTypeClusterIP, claimPort))
		pairs = append(pairs, p)
		q := claimPair{variant: v, order: externalFirst}
		victim := tcpService(victimNS, "eip-"+slug(v.name), "victim", corev1.ServiceTypeClusterIP, claimPort)
		victim.Spec.ExternalIPs = []string{ext.String()}
		ext = ext.Next()
		q.victim = createService(t, sb, victim)
		last = q.victim.CreationTimestamp
		pairs = append(pairs, q)
	}
	waitClockPast(t, last)
	for i := range pairs {
		p := &pairs[i]
		switch p.order {
		case victimFirst:
			p.attacker = createService(t, sb, attackerService(p.variant, "later-"+slug(p.variant.name), netip.MustParseAddr(p.victim.Spec.ClusterIP)))
		case externalFirst:
			p.attacker = createService(t, sb, attackerService(p.variant, "eip-"+slug(p.variant.name), netip.MustParseAddr(p.target())))
		}
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

// logProblem logs the Problem node n's servicemap shows for the Service's first row.
func logProblem(t *testing.T, n *framework.Node, namespace, name string) {
	t.Helper()
	m, err := n.API.ServiceMap(context.Background(), namespace, name)
	require.NoError(t, err)
	for _, r := range m.Items {
		if r.Name == name && r.Problem != nil {
			t.Logf("%s/%s on %s: problem %s: %s", namespace, name, n.Name, r.Problem.Reason, r.Problem.Message)
			return
		}
	}
}
