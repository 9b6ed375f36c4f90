package proxy

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/ofctl"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/ovsdb"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
	"github.com/antrea-proxy/antrea-proxy/test/ovssandbox"
)

// ovsdbRoundStore keeps the round in the bridge's external_ids, as the agent does.
type ovsdbRoundStore struct {
	db     *ovsdb.Client
	bridge string
}

func (r ovsdbRoundStore) LoadRound(ctx context.Context) (uint16, bool, error) {
	ids, err := r.db.BridgeExternalIDs(ctx, r.bridge)
	if err != nil {
		return 0, false, err
	}
	var n uint16
	if _, err := fmt.Sscanf(ids["antrea-proxy-round"], "%d", &n); err != nil {
		return 0, false, nil
	}
	return n, true, nil
}

func (r ovsdbRoundStore) SaveRound(ctx context.Context, round uint16) error {
	return r.db.SetBridgeExternalIDs(ctx, r.bridge, map[string]string{"antrea-proxy-round": fmt.Sprint(round)})
}

// TestIntegrationRealOVS runs the proxier against a real userspace OVS with a fake clientset and
// pod namespaces attached by the test, which also installs the L3 forwarding to its pods (the
// node data path's job). A ClusterIP, a NodePort and a VIP-mode LB IP reach both endpoints; a
// Proxy-mode LB IP gets no flow.
func TestIntegrationRealOVS(t *testing.T) {
	o := ovssandbox.Start(t, ovssandbox.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	br := "brpx" + fmt.Sprint(time.Now().UnixNano()%100000)
	db, err := ovsdb.New(ctx, o.DBSocket())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.EnsureBridge(ctx, ovsdb.BridgeConfig{Name: br, DatapathType: ovsdb.DatapathNetdev}); err != nil {
		t.Fatal(err)
	}
	if err := o.WaitForBridge(br); err != nil {
		t.Fatal(err)
	}
	ofb := ofctl.New(o.MgmtSocket(br))

	gwMAC := "aa:bb:cc:00:00:01"
	client := ovssandbox.NewNetNS(t, "cli")
	cv := ovssandbox.AttachVeth(t, o, br, client, ovssandbox.VethConfig{Addr: "10.10.0.10/24"})
	for _, cmd := range [][]string{
		{"ip", "neigh", "replace", "10.10.0.1", "lladdr", gwMAC, "dev", "eth0", "nud", "permanent"},
		{"ip", "route", "add", "default", "via", "10.10.0.1"},
	} {
		if out, err := client.Exec(cmd...); err != nil {
			t.Fatalf("%v: %v %s", cmd, err, out)
		}
	}
	echo := ovssandbox.BuildEcho(t)
	type pod struct {
		name string
		ip   string
		veth *ovssandbox.Veth
	}
	pods := []*pod{{name: "pod1", ip: "10.10.0.11"}, {name: "pod2", ip: "10.10.0.12"}}
	l3 := []of.Op{{Kind: of.AddFlow, Flow: &of.Flow{Table: pipeline.TableL3Forwarding, Priority: 200,
		Match:   of.Match{EthType: of.EthTypeIP, Dst: mustPrefix("10.10.0.10/32")},
		Actions: []of.Action{of.SetEthDst{MAC: cv.MAC}, of.Output{Port: cv.OFPort}}}}}
	for _, p := range pods {
		ns := ovssandbox.NewNetNS(t, p.name)
		p.veth = ovssandbox.AttachVeth(t, o, br, ns, ovssandbox.VethConfig{Addr: p.ip + "/24"})
		echo.Start(t, ns, p.name, 8080)
		l3 = append(l3, of.Op{Kind: of.AddFlow, Flow: &of.Flow{Table: pipeline.TableL3Forwarding, Priority: 200,
			Match:   of.Match{EthType: of.EthTypeIP, Dst: mustPrefix(p.ip + "/32")},
			Actions: []of.Action{of.SetEthDst{MAC: p.veth.MAC}, of.Output{Port: p.veth.OFPort}}}})
	}
	if err := ofb.Apply(ctx, l3); err != nil {
		t.Fatal(err)
	}

	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.168.77.10"}}}}
	objs := []runtime.Object{node,
		makeService("default", "web", "10.96.0.10", withLB(30080, vip("172.18.0.100"))),
		makeService("default", "behind-proxy", "10.96.0.11", withLB(30081, proxyMode("172.18.0.101"))),
	}
	for _, svc := range []string{"web", "behind-proxy"} {
		objs = append(objs, makeSlice("default", svc, svc+"-1", 8080, v1.ProtocolTCP, "http",
			ep{ip: "10.10.0.11", node: testNode, ready: true}, ep{ip: "10.10.0.12", node: testNode, ready: true}))
	}
	cs := fake.NewSimpleClientset(objs...)
	opts := Options{NodeName: testNode, ProxyLoadBalancerIPs: true, MinSyncInterval: 100 * time.Millisecond, FullSyncPeriod: time.Minute}
	p, err := New(opts, ofb, ovsdbRoundStore{db: db, bridge: br})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(runCtx, cs) }()
	defer func() { stop(); <-done }()
	waitFor(t, 20*time.Second, "both Services installed", func() bool { return len(p.Services()) == 2 })

	dial := func(addr string) (string, error) {
		return echo.Dial(ctx, client, "tcp", addr, 2*time.Second)
	}
	for _, target := range []struct{ name, addr string }{
		{"ClusterIP", "10.96.0.10:80"}, {"NodePort", "192.168.77.10:30080"}, {"LB VIP", "172.18.0.100:80"},
	} {
		seen := map[string]int{}
		for i := 0; i < 20; i++ {
			reply, err := dial(target.addr)
			if err != nil {
				t.Fatalf("%s %s: connection %d: %v\nflows:\n%s", target.name, target.addr, i, err, dumpFlows(o, br))
			}
			server, from, err := ovssandbox.ParseEchoReply(reply)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(from, "10.10.0.10:") {
				t.Errorf("%s: backend saw client %s, want 10.10.0.10 (no SNAT for an in-node client)", target.name, from)
			}
			seen[server]++
		}
		if seen["pod1"] == 0 || seen["pod2"] == 0 {
			t.Errorf("%s: want both endpoints to answer over 20 connections, got %v", target.name, seen)
		}
	}
	flows := dumpFlows(o, br)
	if strings.Contains(flows, "172.18.0.101") {
		t.Errorf("Proxy-mode LB IP 172.18.0.101 must have no flow:\n%s", flows)
	}
	if !strings.Contains(flows, "nw_dst=10.96.0.11,") || !strings.Contains(flows, "tp_dst=30081") {
		t.Errorf("the Proxy-mode Service's ClusterIP and NodePort flows are missing:\n%s", flows)
	}
	if _, err := echo.Dial(ctx, client, "tcp", "172.18.0.101:80", 500*time.Millisecond); err == nil {
		t.Error("a connection to the Proxy-mode LB IP was answered, but nothing on this bridge may intercept it")
	}
}

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func dumpFlows(o *ovssandbox.Instance, br string) string {
	out, err := o.Ofctl("dump-flows", br, "--no-stats")
	if err != nil {
		return err.Error()
	}
	return out
}

// waitFor polls cond until it holds or the deadline passes; the failure names what never
// happened.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
