//go:build demo

package demo

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// answerTimeout is how long a probe may go unanswered (while ARP, routes and flows settle)
// before the demo fails; a wrong answer fails it at once.
const answerTimeout = 20 * time.Second

// expect is what a probe must see: who may answer, which source address the backend may see,
// and which external load balancer must relay the connection (nil: none may).
type expect struct {
	servers []string
	sources []string
	relay   *framework.ProxyLB
}

// who names the address a backend saw.
func (d *demo) who(ip string) string {
	for name, a := range d.podIPs {
		if a == ip {
			return "pod " + name
		}
	}
	for name, a := range d.nodeIPs {
		if a == ip {
			return name
		}
	}
	switch ip {
	case framework.ClientIP.String():
		return "the external client"
	case framework.RouterIP.String():
		return "the external load balancer"
	case config.DefaultServiceVirtualIPv4:
		return "the node's Service SNAT address"
	}
	return "?"
}

// nodeSources are the addresses node masquerades traffic from outside to: its Service SNAT
// address for a backend on itself, its underlay address for one on the other node.
func nodeSources(n *framework.Node) []string {
	return []string{config.DefaultServiceVirtualIPv4, n.IP.String()}
}

func (d *demo) relayCounts(ctx context.Context) (map[*framework.ProxyLB]int64, error) {
	out := map[*framework.ProxyLB]int64{}
	for _, lb := range d.lbs {
		st, err := lb.Stats(ctx)
		if err != nil {
			return nil, err
		}
		out[lb] = st.TCP
	}
	return out, nil
}

// try connects from ns to target until it is answered (at most answerTimeout), prints the
// answer and records a failure when the answer is not what want says.
func (d *demo) try(ns *framework.NetNS, label, target string, want expect) {
	ctx := context.Background()
	var r framework.EchoReply
	var relayed []*framework.ProxyLB
	err := framework.Poll(ctx, answerTimeout, "an answer from "+target, func(ctx context.Context) (bool, string, error) {
		before, err := d.relayCounts(ctx)
		if err != nil {
			return false, "", err
		}
		if r, err = ns.Echo(ctx, "tcp", target, 3*time.Second); err != nil {
			return false, err.Error(), nil
		}
		after, err := d.relayCounts(ctx)
		if err != nil {
			return false, "", err
		}
		relayed = relayed[:0]
		for _, lb := range d.lbs {
			if after[lb] > before[lb] {
				relayed = append(relayed, lb)
			}
		}
		return true, "", nil
	})
	if err != nil {
		d.fail("    %-32s %-20s -> no answer: %v", label, target, err)
		return
	}
	via := "answered inside the cluster (OVS load-balanced it)"
	if len(relayed) > 0 {
		via = "relayed by the external load balancer at " + relayed[0].IP.String()
	}
	say("    %-32s %-20s -> %s answered; it saw %s (%s): %s", label, target, r.Server, r.ClientIP(), d.who(r.ClientIP()), via)
	var wrong []string
	if !slices.Contains(want.servers, r.Server) {
		wrong = append(wrong, fmt.Sprintf("answered by %s, want one of %v", r.Server, want.servers))
	}
	if !slices.Contains(want.sources, r.ClientIP()) {
		wrong = append(wrong, fmt.Sprintf("the backend saw %s, want one of %v", r.ClientIP(), want.sources))
	}
	switch {
	case want.relay == nil && len(relayed) > 0:
		wrong = append(wrong, "relayed by an external load balancer, want OVS to answer it in the cluster")
	case want.relay != nil && !slices.Equal(relayed, []*framework.ProxyLB{want.relay}):
		wrong = append(wrong, "want it relayed by the external load balancer at "+want.relay.IP.String()+" alone")
	}
	if len(wrong) > 0 {
		d.fail("      WRONG: %s", strings.Join(wrong, "; "))
	}
}

// checkARP records a failure unless ns resolved ip to node's uplink MAC: the provider's
// announcing node answered ARP for the VIP.
func (d *demo) checkARP(ns *framework.NetNS, l *lbSvc, node *framework.Node) {
	want, err := node.UplinkMAC()
	if err != nil {
		d.fail("    %v", err)
		return
	}
	got, err := ns.NeighborMAC(l.ip)
	if err != nil || got != want {
		d.fail("      WRONG: the client resolved %s to %q (err %v), want %s's MAC %s", l.ip, got, err, node.Name, want)
		return
	}
	say("    (the external client resolved %s to %s's MAC %s: the node the provider chose answers ARP)", l.ip, node.Name, got)
}

// fail prints a failure line and marks the demo failed; it ends before saying it is up.
func (d *demo) fail(format string, args ...any) {
	say(format, args...)
	d.t.Errorf(format, args...)
}
