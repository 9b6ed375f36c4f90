//go:build bench

package bench

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"time"

	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// metricsURL is where both proxies serve /metrics inside their node (the default address of each).
const metricsURL = "http://127.0.0.1:10249/metrics"

// side is one proxy under test.
type side struct {
	Name string
	Node *framework.Node
	// Prefix starts its metric names ("antrea_proxy_" or "kubeproxy_").
	Prefix string
	// PeriodicSync (without the prefix) is the histogram its periodic resync is observed in
	// (the agent's is a full sync); "" when it has none: kube-proxy v1.37 nftables does not
	// sync while nothing changes.
	PeriodicSync string
	// programmed reports whether every Service of svcs is programmed (and if not, what is
	// missing); err is for a check that could not look (to be retried).
	programmed func(ctx context.Context, svcs []benchService) (ok bool, missing string, err error)
	// locator returns, for Service name, what observe needs to find its rules cheaply.
	locators map[string]string
	// observe reports whether ip is an endpoint of Service name's programmed rules, and the
	// time it looked.
	observe func(name, ip string) (at time.Time, ok bool, err error)
}

// metrics fetches the side's /metrics.
func (s *side) metrics(ctx context.Context) ([]byte, error) {
	return s.Node.NS.HTTPGet(ctx, metricsURL)
}

// hist is histogram name (without the prefix) from a fresh scrape.
func (s *side) hist(ctx context.Context, name string) (histogram, error) {
	b, err := s.metrics(ctx)
	if err != nil {
		return histogram{}, err
	}
	return parseHistogram(b, s.Prefix+name), nil
}

// antreaSide is the antrea-agent node: programmed when the agent's service map shows every
// Service with a group of all its endpoints; a change is in OVS when the Service's group (read
// with `ovs-ofctl dump-groups <bridge> <id>`) holds the new endpoint.
func antreaSide(n *framework.Node, k int) *side {
	s := &side{Name: "antrea-agent", Node: n, Prefix: framework.AntreaProxyMetricsPrefix, PeriodicSync: "sync_full_proxy_rules_duration_seconds",
		locators: map[string]string{}}
	s.programmed = func(ctx context.Context, svcs []benchService) (bool, string, error) {
		info, err := n.API.AgentInfo(ctx)
		if err != nil {
			return false, "", err
		}
		if info.Services < len(svcs) {
			return false, fmt.Sprintf("%d Services programmed", info.Services), nil
		}
		m, err := n.API.ServiceMap(ctx, benchNamespace, "")
		if err != nil {
			return false, "", err
		}
		got := map[string]bool{}
		for _, it := range m.Items {
			if it.GroupID != 0 && it.Buckets == k {
				got[it.Name] = true
				s.locators[it.Name] = fmt.Sprint(it.GroupID)
			}
		}
		for _, sv := range svcs {
			if !got[sv.Name] {
				return false, fmt.Sprintf("%d of %d Services have a group of %d endpoints; not %s", len(got), len(svcs), k, sv.Name), nil
			}
		}
		return true, "", nil
	}
	s.observe = func(name, ip string) (time.Time, bool, error) {
		out, err := n.OVS.Ofctl("dump-groups", framework.Bridge, s.locators[name])
		if err != nil {
			return time.Time{}, false, err
		}
		return time.Now(), strings.Contains(out, regHex(ip)) || hasIP(out, ip), nil
	}
	return s
}

// regHex is ip as the agent's buckets load it into a register ("0xac1f0001->").
func regHex(ip string) string {
	var a, b, c, d uint32
	fmt.Sscanf(ip, "%d.%d.%d.%d", &a, &b, &c, &d)
	return fmt.Sprintf("0x%x->", a<<24|b<<16|c<<8|d)
}

// kubeProxyServiceRE matches an element of kube-proxy's service-ips map: ClusterIP, port and
// the Service's chain.
var kubeProxyServiceRE = regexp.MustCompile(`(\d+\.\d+\.\d+\.\d+) \. tcp \. 80 : goto (service-[^ ,\n}]+)`)

// kubeProxySide is the kube-proxy node: programmed when its ruleset maps every ClusterIP; a change is programmed when a netlink read of the Service's
// chain (chainHolds) finds the new endpoint in it.
func kubeProxySide(n *framework.Node) *side {
	s := &side{Name: "kube-proxy", Node: n, Prefix: framework.KubeProxyMetricsPrefix, locators: map[string]string{}}
	s.programmed = func(ctx context.Context, svcs []benchService) (bool, string, error) {
		rs, err := n.KubeProxyRuleset()
		if err != nil {
			return false, "", err
		}
		chains := map[string]string{}
		for _, m := range kubeProxyServiceRE.FindAllStringSubmatch(rs, -1) {
			chains[m[1]] = m[2]
		}
		for _, sv := range svcs {
			c, ok := chains[sv.ClusterIP]
			if !ok {
				return false, fmt.Sprintf("%d ClusterIPs in the ruleset; not %s's %s", len(chains), sv.Name, sv.ClusterIP), nil
			}
			s.locators[sv.Name] = c
		}
		return true, "", nil
	}
	s.observe = func(name, ip string) (time.Time, bool, error) {
		var ok bool
		err := n.NS.Do(func() (err error) {
			ok, err = chainHolds("kube-proxy", s.locators[name], netip.MustParseAddr(ip), endpointPort)
			return err
		})
		return time.Now(), ok, err
	}
	return s
}

// hasIP reports whether text holds ip not followed by another digit.
func hasIP(text, ip string) bool {
	for i := strings.Index(text, ip); i >= 0; {
		end := i + len(ip)
		if end == len(text) || text[end] < '0' || text[end] > '9' {
			return true
		}
		j := strings.Index(text[end:], ip)
		if j < 0 {
			return false
		}
		i = end + j
	}
	return false
}
