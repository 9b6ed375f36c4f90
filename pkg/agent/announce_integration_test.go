package agent

import (
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/antrea-proxy/antrea-proxy/pkg/netutil"
	"github.com/antrea-proxy/antrea-proxy/pkg/nodenet"
	"github.com/antrea-proxy/antrea-proxy/test/ovssandbox"
)

func run(t *testing.T, ns *ovssandbox.NetNS, cmds ...string) {
	t.Helper()
	for _, c := range cmds {
		out, err := ns.Exec(strings.Fields(c)...)
		require.NoError(t, err, "%s in %s: %s", c, ns.Name, out)
	}
}

// lladdr returns the MAC ns resolved for ip on eth0, "" when it has none.
func lladdr(t *testing.T, ns *ovssandbox.NetNS, ip netip.Addr) string {
	out, err := ns.Exec("ip", "-4", "neigh", "show", "to", ip.String(), "dev", "eth0")
	require.NoError(t, err, out)
	f := strings.Fields(out)
	for i := range f {
		if f[i] == "lladdr" && i+1 < len(f) {
			return f[i+1]
		}
	}
	return ""
}

// TestForgedAnnouncementIntegration is the regression test of a traffic hijack: a Service whose
// antrea-proxy.io/announcing-node annotation names an address antrea-controller did not
// allocate to it (here the LAN's router, also set as an externalIP, and an address of a Proxy
// pool) must not make the node answer ARP for it nor announce it by gratuitous ARP, while the
// address the controller did allocate is announced. It runs the agent's predicate and the
// nodenet announcer against real network namespaces on one LAN.
func TestForgedAnnouncementIntegration(t *testing.T) {
	vip, router, proxyIP := netip.MustParseAddr("10.99.1.5"), netip.MustParseAddr("10.99.0.254"), netip.MustParseAddr("10.99.1.6")
	sw := ovssandbox.NewNetNS(t, "fgsw")
	node := ovssandbox.NewNetNS(t, "fgnode")
	client := ovssandbox.NewNetNS(t, "fgcli")
	run(t, sw, "ip link add br0 type bridge", "ip link set br0 up")
	for i, m := range []struct {
		ns   *ovssandbox.NetNS
		addr string
	}{{node, "10.99.0.1/24"}, {client, "10.99.0.3/24"}} {
		port := []string{"pnode", "pcli"}[i]
		run(t, sw, "ip link add "+port+" type veth peer name eth0 netns "+m.ns.Name, "ip link set "+port+" master br0", "ip link set "+port+" up")
		run(t, m.ns, "ip addr add "+m.addr+" dev eth0", "ip link set eth0 up")
	}
	// The node routes every address the proxier programs into its gateway, as nodenet does.
	run(t, node, "ip link add gw0 type veth peer name gw0p", "ip link set gw0 up", "ip link set gw0p up",
		"sysctl -qw net.ipv4.ip_forward=1")
	for _, ip := range []netip.Addr{vip, router, proxyIP} {
		run(t, node, "ip route add "+ip.String()+"/32 dev gw0")
	}
	// The client records every gratuitous ARP it receives, even for addresses it never asked.
	run(t, client, "ip route add 10.99.1.0/24 dev eth0", "sysctl -qw net.ipv4.conf.eth0.arp_accept=1")
	nodeMAC, err := node.Exec("cat", "/sys/class/net/eth0/address")
	require.NoError(t, err)
	nodeMAC = strings.TrimSpace(nodeMAC)

	vipMode, proxyMode := v1.LoadBalancerIPModeVIP, v1.LoadBalancerIPModeProxy
	svc := func(name, annotation string, ingress string, mode *v1.LoadBalancerIPMode) *v1.Service {
		s := &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Annotations: map[string]string{"antrea-proxy.io/announcing-node": annotation}},
			Spec:       v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer},
		}
		if ingress != "" {
			s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: ingress, IPMode: mode}}
		}
		return s
	}
	forged := svc("forged", "10.99.0.254=node-1", "", nil)
	forged.Spec.ExternalIPs = []string{router.String()}
	services := []*v1.Service{
		svc("allocated", "10.99.1.5=node-1", vip.String(), &vipMode),
		forged,
		svc("proxy", "10.99.1.6=node-1", proxyIP.String(), &proxyMode),
	}
	programmed := []netip.Addr{vip, router, proxyIP}

	ann := nodenet.NewAnnouncer(nodenet.HostAnnounceOps{Host: nodenet.Host{NetNS: "/var/run/netns/" + node.Name}}, 3)
	t.Cleanup(func() { _ = ann.Withdraw() })
	for range 3 { // the first announcement and its repeats
		want := announcedIPs("node-1", served, services, programmed)
		require.Equal(t, []netip.Addr{vip}, want)
		require.NoError(t, ann.Sync("eth0", want))
	}
	// The allocated address reached the client by gratuitous ARP alone: the capture works.
	require.True(t, pollFor(3*time.Second, 50*time.Millisecond, func() bool { return lladdr(t, client, vip) == nodeMAC }),
		"the client learns %s from the node's gratuitous ARP", vip)
	// No gratuitous ARP for the forged addresses.
	require.Empty(t, lladdr(t, client, router), "no gratuitous ARP for the router's address")
	require.Empty(t, lladdr(t, client, proxyIP), "no gratuitous ARP for the Proxy-mode address")

	// No ARP reply either: the client keeps asking and nobody answers, while the allocated
	// address, flushed, is resolved again.
	poke := func(ip netip.Addr) {
		require.NoError(t, netutil.InNetNS("/var/run/netns/"+client.Name, func() error {
			c, err := net.Dial("udp", net.JoinHostPort(ip.String(), "9"))
			if err != nil {
				return err
			}
			defer c.Close()
			_, err = c.Write([]byte("who has it"))
			return err
		}))
	}
	run(t, client, "ip neigh flush dev eth0")
	require.True(t, pollFor(5*time.Second, 100*time.Millisecond, func() bool {
		poke(vip)
		return lladdr(t, client, vip) == nodeMAC
	}), "the node answers ARP for %s", vip)
	require.False(t, pollFor(2*time.Second, 100*time.Millisecond, func() bool {
		poke(router)
		poke(proxyIP)
		return lladdr(t, client, router) != "" || lladdr(t, client, proxyIP) != ""
	}), "the node answers ARP for neither the router's nor the Proxy-mode address")
}

// pollFor calls cond every interval, on the test's goroutine, until it returns true (then true)
// or d has passed (then false). Unlike require.Eventually and Never, it never leaves a call of
// cond running after it returns: cond runs commands in the test's network namespaces, which
// t.Context() cancels (killing them) once the test ends.
func pollFor(d, interval time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(interval)
	}
}
