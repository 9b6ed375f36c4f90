//go:build demo

package demo

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/antrea-proxy/antrea-proxy/pkg/lbapi"
	"github.com/antrea-proxy/antrea-proxy/pkg/loadbalancer/conditions"
	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
	"github.com/antrea-proxy/antrea-proxy/test/e2e/lbstatus"
)

// The demo's pools. The VIP pool lies inside framework.VIPRange and is on-link for the external
// client and the router, so the node the provider picks answers ARP for its addresses; the Proxy
// pool lies inside framework.ProxyRange, whose addresses the router's l4proxy instances own.
var (
	vipPool   = framework.LBPool{Name: "vip", CIDRs: []netip.Prefix{netip.MustParsePrefix("172.18.0.16/28")}}
	proxyPool = framework.LBPool{Name: "proxy", CIDRs: []netip.Prefix{netip.MustParsePrefix("172.18.1.16/28")}, Proxy: true}
	// localIP is the address web-local asks for; it lies in the Proxy pool.
	localIP = netip.MustParseAddr("172.18.1.25")
)

const servingTimeout = time.Minute

// lbSvc is one demo LoadBalancer Service: how it asks the provider for an address, and what the
// provider must answer.
type lbSvc struct {
	name string
	// how tells how the Service selects its pool.
	how      string
	mutate   func(*corev1.Service)
	wantPool framework.LBPool
	wantMode corev1.LoadBalancerIPMode
	// wantIP is the address the Service asked for, if any.
	wantIP netip.Addr
	// wantDegraded is the LoadBalancerDegraded reason the provider must set, "" for none.
	wantDegraded string

	svc *corev1.Service // as last read, after the provider served it
	ip  netip.Addr
}

// demoServices are the three Services: pools chosen by configuration order, by the lb-pool
// annotation and by a requested address; the last one uses eTP=Local on a Proxy pool.
func demoServices() []*lbSvc {
	return []*lbSvc{{
		name: "web-vip", how: "no annotation: the first pool in the configuration",
		wantPool: vipPool, wantMode: corev1.LoadBalancerIPModeVIP,
	}, {
		name: "web-proxy", how: lbapi.AnnotationPool + ": proxy",
		mutate:   func(s *corev1.Service) { s.Annotations = map[string]string{lbapi.AnnotationPool: "proxy"} },
		wantPool: proxyPool, wantMode: corev1.LoadBalancerIPModeProxy,
	}, {
		name: "web-local", how: lbapi.AnnotationLoadBalancerIPs + ": " + localIP.String() + ", externalTrafficPolicy: Local",
		mutate: func(s *corev1.Service) {
			s.Annotations = map[string]string{lbapi.AnnotationLoadBalancerIPs: localIP.String()}
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		},
		wantPool: proxyPool, wantMode: corev1.LoadBalancerIPModeProxy, wantIP: localIP,
		wantDegraded: conditions.ReasonExternalTrafficPolicyNotSupported,
	}}
}

func (l *lbSvc) spec() *corev1.Service {
	s := lbService(l.name)
	if l.mutate != nil {
		l.mutate(s)
	}
	return s
}

func poolContains(p framework.LBPool, ip netip.Addr) bool {
	for _, c := range p.CIDRs {
		if c.Contains(ip) {
			return true
		}
	}
	return false
}

// waitServed waits for the provider's verdict on l (the KEP-4631 tri-state wait), then checks
// that the address comes from the expected pool with the expected ipMode and that the Degraded
// condition is exactly what l expects.
func (d *demo) waitServed(ctx context.Context, l *lbSvc) error {
	r, err := lbstatus.WaitForServing(ctx, d.sb.CP.Client, "demo", l.name, nil, servingTimeout)
	if err != nil {
		return err
	}
	if r.Outcome != lbstatus.Pass {
		return fmt.Errorf("Service %s: the provider did not serve it (%s): %s", l.name, r.Outcome, r.Reason)
	}
	err = framework.Poll(ctx, 30*time.Second, fmt.Sprintf("the provider's Degraded condition on %s to be %q", l.name, l.wantDegraded),
		func(ctx context.Context) (bool, string, error) {
			svc, err := d.sb.CP.Client.CoreV1().Services("demo").Get(ctx, l.name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			l.svc = svc
			got := ""
			if c := meta.FindStatusCondition(svc.Status.Conditions, conditions.TypeDegraded); c != nil && c.Status == metav1.ConditionTrue {
				got = c.Reason
			}
			return got == l.wantDegraded, "Degraded reason " + got, nil
		})
	if err != nil {
		return err
	}
	ing := l.svc.Status.LoadBalancer.Ingress
	if len(ing) != 1 || ing[0].IPMode == nil {
		return fmt.Errorf("Service %s: want one ingress with an ipMode, got %v", l.name, ing)
	}
	if l.ip, err = netip.ParseAddr(ing[0].IP); err != nil {
		return fmt.Errorf("Service %s: ingress IP: %w", l.name, err)
	}
	if *ing[0].IPMode != l.wantMode || !poolContains(l.wantPool, l.ip) || (l.wantIP.IsValid() && l.ip != l.wantIP) {
		return fmt.Errorf("Service %s: got %s (%s), want an address of pool %q (%s)", l.name, l.ip, *ing[0].IPMode, l.wantPool.Name, l.wantMode)
	}
	return nil
}

// announcer returns the node the provider named in the announcing-node annotation for l's VIP.
func (d *demo) announcer(l *lbSvc) (*framework.Node, error) {
	as, err := lbapi.ParseAnnouncingNodes(l.svc.Annotations[lbapi.AnnotationAnnouncingNode])
	if err != nil {
		return nil, err
	}
	for _, a := range as {
		if a.Addr == l.ip {
			if n := d.sb.NodeByName(a.Node); n != nil {
				return n, nil
			}
		}
	}
	return nil, fmt.Errorf("Service %s: no sandbox node announces %s (annotation %q)", l.name, l.ip,
		l.svc.Annotations[lbapi.AnnotationAnnouncingNode])
}

// printConditions prints the Services as the provider left them: pool, ingress and the
// KEP-4631 conditions as type=status/reason.
func printConditions(svcs []*lbSvc) {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "   SERVICE\tTYPE\tPOOL\tINGRESS-IP\tIPMODE\tCONDITIONS")
	for _, l := range svcs {
		var conds []string
		for _, typ := range []string{conditions.TypeServing, conditions.TypeProvisioning, conditions.TypeDegraded} {
			if c := meta.FindStatusCondition(l.svc.Status.Conditions, typ); c != nil {
				conds = append(conds, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
			}
		}
		fmt.Fprintf(w, "   %s\t%s\t%s\t%s\t%s\t%s\n", l.name, l.svc.Spec.Type, l.wantPool.Name, l.ip,
			*l.svc.Status.LoadBalancer.Ingress[0].IPMode, strings.Join(conds, " "))
	}
	_ = w.Flush()
}

// degradedMessage returns the message of l's Degraded condition.
func degradedMessage(l *lbSvc) string {
	if c := meta.FindStatusCondition(l.svc.Status.Conditions, conditions.TypeDegraded); c != nil {
		return c.Message
	}
	return ""
}
