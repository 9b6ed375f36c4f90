package antctl

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver"
	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiv1"
	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/ofctl"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/ovsdb"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy"
	"github.com/antrea-proxy/antrea-proxy/test/ovssandbox"
)

const itNode = "node-a"

func lbIngress(ip, host, mode string) v1.LoadBalancerIngress {
	ing := v1.LoadBalancerIngress{IP: ip, Hostname: host}
	if mode != "" {
		m := v1.LoadBalancerIPMode(mode)
		ing.IPMode = &m
	}
	return ing
}

func itObjects() []runtime.Object {
	tcp := v1.ProtocolTCP
	web := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
			Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: tcp, NodePort: 30080, TargetPort: intstr.FromInt32(8080)}}},
		Status: v1.ServiceStatus{LoadBalancer: v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{
			lbIngress("172.18.0.100", "", "VIP"),
			lbIngress("172.18.0.101", "", "Proxy"),
			lbIngress("172.18.0.102", "", ""),
			lbIngress("", "lb.example.com", ""),
			lbIngress("172.18.0.104", "", "Tunnel"), // not accepted by a real apiserver
			lbIngress("fd00:18::100", "", "VIP"),    // this agent serves IPv4 only
		}}},
	}
	db := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "db"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: "10.96.1.20", ClusterIPs: []string{"10.96.1.20"},
			ExternalIPs: []string{"192.168.50.10"},
			Ports: []v1.ServicePort{
				{Name: "sql", Port: 5432, Protocol: tcp, TargetPort: intstr.FromInt32(5432)},
				{Name: "admin", Port: 8081, Protocol: tcp, TargetPort: intstr.FromInt32(8081)}}},
	}
	slice := func(ns, svc, port string, portNum int32, ips ...string) *discovery.EndpointSlice {
		s := &discovery.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: svc + "-" + port, Labels: map[string]string{discovery.LabelServiceName: svc}},
			AddressType: discovery.AddressTypeIPv4,
			Ports:       []discovery.EndpointPort{{Name: &port, Port: &portNum, Protocol: &tcp}},
		}
		for _, ip := range ips {
			node, yes := itNode, true
			s.Endpoints = append(s.Endpoints, discovery.Endpoint{Addresses: []string{ip}, NodeName: &node,
				Conditions: discovery.EndpointConditions{Ready: &yes, Serving: &yes}})
		}
		return s
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: itNode},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.168.77.10"}}}}
	// prod/db's admin port has no endpoint: its traffic is dropped.
	return []runtime.Object{node, web, db, slice("default", "web", "http", 8080, "10.10.0.11", "10.10.0.12"), slice("prod", "db", "sql", 5432, "10.10.0.21")}
}

// agent is one proxier on its own bridge, with its API on its own socket.
type agent struct {
	bridge, socket string
}

func startITAgent(t *testing.T, ctx context.Context, o *ovssandbox.Instance, cs kubernetes.Interface, br string, proxyLB bool) agent {
	t.Helper()
	db, err := ovsdb.New(ctx, o.DBSocket())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if err := db.EnsureBridge(ctx, ovsdb.BridgeConfig{Name: br, DatapathType: ovsdb.DatapathNetdev}); err != nil {
		t.Fatal(err)
	}
	if err := o.WaitForBridge(br); err != nil {
		t.Fatal(err)
	}
	p, err := proxy.New(proxy.Options{NodeName: itNode, ProxyLoadBalancerIPs: proxyLB, MinSyncInterval: 50 * time.Millisecond, FullSyncPeriod: time.Minute, Round: 1},
		ofctl.New(o.MgmtSocket(br)))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(runCtx, cs) }()
	t.Cleanup(func() { stop(); <-done })

	cfg := &config.AgentConfig{NodeName: itNode, OVSBridge: br, AntreaProxy: config.AntreaProxyConfig{ProxyLoadBalancerIPs: &proxyLB}}
	cfg.DefaultsFrom(config.Env{})
	cfg.APISocket = filepath.Join(t.TempDir(), "agent.sock")
	s, err := apiserver.Start(runCtx, apiserver.Options{Config: cfg, Services: p, OVS: db})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	deadline := time.Now().Add(20 * time.Second)
	for len(p.Services()) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("bridge %s: Services not programmed after 20s", br)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return agent{bridge: br, socket: cfg.APISocket}
}

// TestIntegrationServiceMapRealOVS runs two proxiers against a real OVS (userspace datapath),
// one with proxyLoadBalancerIPs=true and one with false, each serving the agent API, and reads
// them with antctl: the LB decisions follow the Option 1 matrix, and each port's flow count is
// what ovs-ofctl dumps for its cookie.
func TestIntegrationServiceMapRealOVS(t *testing.T) {
	o := ovssandbox.Start(t, ovssandbox.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs := fake.NewSimpleClientset(itObjects()...)
	suffix := strconv.FormatInt(time.Now().UnixNano()%100000, 10)
	on := startITAgent(t, ctx, o, cs, "brsmon"+suffix, true)
	off := startITAgent(t, ctx, o, cs, "brsmoff"+suffix, false)

	type decision struct {
		programmed bool
		reason     string
	}
	// The Option 1 matrix for web's ingresses, keyed by IP or hostname.
	want := map[*agent]map[string]decision{
		&on: {
			"172.18.0.100":   {true, "programmed (ipMode VIP)"},
			"172.18.0.101":   {false, "skipped: ipMode=Proxy"},
			"172.18.0.102":   {true, "programmed (ipMode unset, treated as VIP)"},
			"lb.example.com": {false, "skipped: hostname-only ingress"},
			"172.18.0.104":   {false, "skipped: unknown ipMode"},
			"fd00:18::100":   {false, "skipped: IP family not served"},
		},
		&off: {
			"172.18.0.100":   {false, "skipped: proxyLoadBalancerIPs=false"},
			"172.18.0.101":   {false, "skipped: proxyLoadBalancerIPs=false"},
			"172.18.0.102":   {false, "skipped: proxyLoadBalancerIPs=false"},
			"lb.example.com": {false, "skipped: hostname-only ingress"},
			"172.18.0.104":   {false, "skipped: proxyLoadBalancerIPs=false"},
			"fd00:18::100":   {false, "skipped: IP family not served"},
		},
	}
	// Flows per port: ClusterIP, ExternalIPs, programmed LB IPs and the NodePort; the first port
	// of each Service (web:http, db:sql, in spec order) also carries the flow that rejects the
	// ClusterIP's other ports.
	wantFlows := map[*agent]map[string]int{
		&on:  {"default/web:http": 5, "prod/db:sql": 3, "prod/db:admin": 2},
		&off: {"default/web:http": 3, "prod/db:sql": 3, "prod/db:admin": 2},
	}
	for _, a := range []*agent{&on, &off} {
		out, errOut, code := run("get", "servicemap", "-A", "-o", "json", "--socket", a.socket)
		if code != 0 {
			t.Fatalf("antctl on %s: exit %d: %s", a.bridge, code, errOut)
		}
		var m apiv1.ServiceMap
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatal(err)
		}
		if len(m.Items) != 3 {
			t.Fatalf("%s: want 3 rows (web:http, db:sql, db:admin), got %d:\n%s", a.bridge, len(m.Items), out)
		}
		for _, it := range m.Items {
			key := it.Namespace + "/" + it.Name + ":" + it.PortName
			if it.Flows != wantFlows[a][key] {
				t.Errorf("%s %s: flows = %d, want %d", a.bridge, key, it.Flows, wantFlows[a][key])
			}
			dumped := dumpCookie(t, o, a.bridge, it.Cookie, it.CookieMask)
			if len(dumped) != it.Flows {
				t.Errorf("%s %s: servicemap says %d flows, ovs-ofctl dump-flows cookie=%s/%s shows %d:\n%s",
					a.bridge, key, it.Flows, it.Cookie, it.CookieMask, len(dumped), strings.Join(dumped, "\n"))
			}
			if it.Name != "web" {
				continue
			}
			// Without session affinity its buckets DNAT themselves: no endpoint flows.
			if it.Endpoints != (apiv1.EndpointCounts{Total: 2, Local: 2, Ready: 2, Serving: 2}) || it.GroupID == 0 || it.EndpointFlows != 0 {
				t.Errorf("%s web: endpoints %+v, group %d, endpoint flows %d", a.bridge, it.Endpoints, it.GroupID, it.EndpointFlows)
			}
			got := map[string]decision{}
			for _, ing := range it.LoadBalancerIngress {
				k := ing.IP
				if k == "" {
					k = ing.Hostname
				}
				got[k] = decision{ing.Programmed, ing.Reason}
				// What is programmed has a flow; what is skipped has none.
				if ing.IP != "" && strings.Contains(strings.Join(dumped, "\n"), "nw_dst="+ing.IP+",") != ing.Programmed {
					t.Errorf("%s: ingress %s programmed=%v but the dumped flows disagree:\n%s", a.bridge, ing.IP, ing.Programmed, strings.Join(dumped, "\n"))
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(want[a]) {
				t.Errorf("%s web decisions:\n got %v\nwant %v", a.bridge, got, want[a])
			}
		}
		table, errOut, code := run("get", "servicemap", "-A", "-o", "wide", "--socket", a.socket)
		if code != 0 {
			t.Fatalf("antctl table: %s", errOut)
		}
		t.Logf("antctl get servicemap -A -o wide (%s):\n%s", a.bridge, table)
	}

	flows, errOut, code := run("get", "ovsflows", "-S", "default/web", "--socket", on.socket)
	if code != 0 {
		t.Fatalf("antctl get ovsflows: %s", errOut)
	}
	for _, want := range []string{"# Service default/web: 5 flows, 1 group", "nw_dst=172.18.0.100,tp_dst=80", "tp_dst=30080", "nat(dst=10.10.0.11:8080)", "group_id="} {
		if !strings.Contains(flows, want) {
			t.Errorf("ovsflows output lacks %q:\n%s", want, flows)
		}
	}
	t.Logf("antctl get ovsflows -S default/web:\n%s", flows)
	info, errOut, code := run("get", "agentinfo", "--socket", off.socket)
	if code != 0 || !strings.Contains(info, "OVS connected:") || !strings.Contains(info, "proxyLoadBalancerIPs:   false") {
		t.Errorf("agentinfo (exit %d, %s):\n%s", code, errOut, info)
	}
	t.Logf("antctl get agentinfo:\n%s", info)
}

// dumpCookie returns the flows ovs-ofctl dumps for cookie/mask.
func dumpCookie(t *testing.T, o *ovssandbox.Instance, br, cookie, mask string) []string {
	t.Helper()
	out, err := o.Ofctl("dump-flows", br, "--no-stats", "cookie="+cookie+"/"+mask)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "actions=") {
			lines = append(lines, strings.TrimSpace(l))
		}
	}
	return lines
}
