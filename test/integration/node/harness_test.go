package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	types100 "github.com/containernetworking/cni/pkg/types/100"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent"
	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/ofctl"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/ovsdb"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy"
	"github.com/antrea-proxy/antrea-proxy/test/ovssandbox"
)

const (
	bridge    = "br-int"
	underlay  = "192.168.50"
	extIP     = underlay + ".100"
	clusterIP = "10.20.0.0/16"
)

// world is the underlay shared by the nodes of one test: an "ext" namespace holding a Linux
// bridge with the external client's address, the fake API server, and the built binaries.
type world struct {
	t      *testing.T
	ext    *ovssandbox.NetNS
	cs     *fake.Clientset
	echo   *ovssandbox.Echo
	plugin string
	// clusterCIDRs are the agents' nodeNetwork.clusterCIDRs (default: clusterIP).
	clusterCIDRs []string
}

func newWorld(t *testing.T, nodes ...*v1.Node) *world {
	t.Helper()
	ovssandbox.Require(t)
	w := &world{t: t, ext: ovssandbox.NewNetNS(t, "ext"), echo: ovssandbox.BuildEcho(t), clusterCIDRs: []string{clusterIP}}
	w.must(w.ext, "ip", "link", "add", "br0", "type", "bridge")
	w.must(w.ext, "ip", "link", "set", "br0", "up")
	w.must(w.ext, "ip", "addr", "add", extIP+"/24", "dev", "br0")
	w.cs = fake.NewClientset()
	for _, n := range nodes {
		if _, err := w.cs.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	w.plugin = buildPlugin(t)
	return w
}

func (w *world) must(ns *ovssandbox.NetNS, args ...string) string {
	w.t.Helper()
	out, err := ns.Exec(args...)
	if err != nil {
		w.t.Fatalf("%s: %v: %v: %s", ns.Name, args, err, out)
	}
	return out
}

func buildPlugin(t *testing.T) string {
	t.Helper()
	goBin := ovssandbox.GoTool()
	bin := filepath.Join(t.TempDir(), "antrea-cni")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, goBin, "build", "-o", bin, "github.com/antrea-proxy/antrea-proxy/cmd/antrea-cni").CombinedOutput(); err != nil {
		t.Fatalf("building antrea-cni: %v: %s", err, out)
	}
	return bin
}

func makeNode(name, podCIDR, internalIP string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:   v1.NodeSpec{PodCIDR: podCIDR, PodCIDRs: []string{podCIDR}},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: internalIP}}}}
}

// node is one node: an OVS instance whose namespace is the node's host namespace, joined to the
// underlay by a veth, with the agent's components.
type node struct {
	w      *world
	name   string
	ip     string
	ovs    *ovssandbox.Instance
	host   *ovssandbox.NetNS
	db     *ovsdb.Client
	of     *ofctl.Bridge
	dir    string
	cfg    *config.AgentConfig
	dp     *agent.DataPath
	px     *proxy.Proxier
	stopFn func()
}

// addNode starts node name with underlay address <underlay>.<index>.
func (w *world) addNode(name string, index int) *node {
	t := w.t
	t.Helper()
	o := ovssandbox.Start(t, ovssandbox.Options{})
	n := &node{w: w, name: name, ip: fmt.Sprintf("%s.%d", underlay, index), ovs: o, host: &ovssandbox.NetNS{Name: o.NetNS}}
	ul := fmt.Sprintf("ul%d", index)
	w.must(w.ext, "ip", "link", "add", ul, "type", "veth", "peer", "name", "uplink", "netns", o.NetNS)
	w.must(w.ext, "ip", "link", "set", ul, "master", "br0", "up")
	w.must(n.host, "ip", "addr", "add", n.ip+"/24", "dev", "uplink")
	w.must(n.host, "ip", "link", "set", "uplink", "up")
	w.must(n.host, "ip", "link", "set", "lo", "up")
	w.must(n.host, "ip", "route", "add", "default", "via", extIP)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := ovsdb.New(ctx, o.DBSocket())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if err := db.EnsureBridge(ctx, ovsdb.BridgeConfig{Name: bridge, DatapathType: ovsdb.DatapathNetdev}); err != nil {
		t.Fatal(err)
	}
	if err := o.WaitForBridge(bridge); err != nil {
		t.Fatal(err)
	}
	n.db, n.of = db, ofctl.New(o.MgmtSocket(bridge))
	n.dir, err = os.MkdirTemp("", "nn") // short: unix socket paths are limited to 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(n.dir) })
	conf := fmt.Sprintf(`
ovsBridge: %s
ovsDatapathType: netdev
ovsRunDir: %s
antreaProxy:
  proxyAll: true
nodeNetwork:
  cniSocket: %s
  cniStateDir: %s
  cniDelSpoolDir: %s
  clusterCIDRs: [%s]
`, bridge, o.RunDir, n.sock(), filepath.Join(n.dir, "state"), n.spool(), `"`+strings.Join(w.clusterCIDRs, `", "`)+`"`)
	n.cfg, err = config.ParseWithEnv([]byte(conf), config.Env{Getenv: func(string) string { return name }})
	if err != nil {
		t.Fatal(err)
	}
	n.start()
	return n
}

func (n *node) sock() string  { return filepath.Join(n.dir, "cni.sock") }
func (n *node) spool() string { return filepath.Join(n.dir, "spool") }

// start runs the agent's components as agent.Run does: the data path first, then the proxier.
func (n *node) start() {
	t := n.w.t
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	round, err := agent.SaveNextRound(ctx, ovsdb.RoundStore{Client: n.db, Bridge: bridge})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	dp, err := agent.NewDataPath(ctx, agent.DataPathOptions{Config: n.cfg, HostNetNS: "/var/run/netns/" + n.ovs.NetNS,
		OVSDB: n.db, Bridge: n.of, Round: round})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	opts := proxy.Options{NodeName: n.name, ProxyLoadBalancerIPs: true, MinSyncInterval: 100 * time.Millisecond, FullSyncPeriod: time.Minute, Round: round}
	dp.ProxyOptions(&opts)
	opts.Observer = dp // as agent.Setup does: host rules follow each sync
	px, err := proxy.New(opts, n.of)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactory(n.w.cs, 0)
	if err := dp.Start(ctx, factory, px); err != nil {
		cancel()
		t.Fatalf("%s: starting the data path: %v", n.name, err)
	}
	done := make(chan error, 1)
	go func() { done <- px.RunWithInformers(ctx, factory) }()
	n.dp, n.px = dp, px
	n.stopFn = func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s: proxier: %v", n.name, err)
		}
		if err := dp.Wait(); err != nil {
			t.Errorf("%s: data path: %v", n.name, err)
		}
		n.stopFn = nil
	}
	t.Cleanup(func() {
		if n.stopFn != nil {
			n.stopFn()
		}
	})
}

// restart stops the agent's components and starts them again, as an agent restart does.
func (n *node) restart() {
	n.stopFn()
	n.start()
}

// cni runs the plugin binary like a container runtime: CNI_* environment, config on stdin.
func (n *node) cni(cmd, containerID string, ns *ovssandbox.NetNS) (string, int) {
	t := n.w.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, n.w.plugin)
	c.Env = []string{"CNI_COMMAND=" + cmd, "CNI_CONTAINERID=" + containerID, "CNI_NETNS=/var/run/netns/" + ns.Name, "CNI_IFNAME=eth0",
		"CNI_PATH=" + filepath.Dir(n.w.plugin), "CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=" + containerID}
	c.Stdin = strings.NewReader(fmt.Sprintf(`{"cniVersion":"1.0.0","name":"antrea","type":"antrea-cni","socketPath":%q,"delSpoolDir":%q}`, n.sock(), n.spool()))
	var out, errOut bytes.Buffer
	c.Stdout, c.Stderr = &out, &errOut
	if err := c.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return out.String(), ee.ExitCode()
		}
		t.Fatalf("running antrea-cni %s: %v: %s", cmd, err, errOut.String())
	}
	return out.String(), 0
}

// pod is a pod network namespace added through the CNI plugin.
type pod struct {
	name string
	ns   *ovssandbox.NetNS
	ip   string
	res  *types100.Result
}

func (n *node) addPod(name string) *pod {
	t := n.w.t
	t.Helper()
	ns := ovssandbox.NewNetNS(t, name)
	out, code := n.cni("ADD", name, ns)
	if code != 0 {
		t.Fatalf("%s: ADD %s: exit %d: %s", n.name, name, code, out)
	}
	var res types100.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.IPs) == 0 {
		t.Fatalf("%s: ADD %s: result %q: %v", n.name, name, out, err)
	}
	return &pod{name: name, ns: ns, ip: res.IPs[0].Address.IP.String(), res: &res}
}

// flows dumps the bridge's flows whose cookie has category cat (all when cat is 0).
func (n *node) flows(cat pipeline.Category) string {
	args := []string{"--no-stats"}
	if cat != 0 {
		args = append(args, fmt.Sprintf("cookie=%#x/%#x", pipeline.Cookie(0, cat, 0), pipeline.CategoryMask))
	}
	out, err := n.ovs.Ofctl("dump-flows", bridge, args...)
	if err != nil {
		n.w.t.Fatal(err)
	}
	return out
}

// nft lists the agent's nftables table; "" while it does not exist yet (the node network is
// programmed after the proxier's first sync).
func (n *node) nft() string {
	out, err := n.host.Exec("nft", "list", "table", "inet", "antrea-proxy")
	if err != nil {
		return ""
	}
	return out
}
func (n *node) routes() string { return n.w.must(n.host, "ip", "route", "show") }

// dial connects from ns to addr until the echo server answers (or the deadline passes) and
// returns the server's name and the client address it saw.
func (w *world) dial(from *ovssandbox.NetNS, addr string, diag func() string) (server, client string) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	deadline := time.Now().Add(15 * time.Second)
	for {
		reply, err := w.echo.Dial(ctx, from, "tcp", addr, 2*time.Second)
		if err == nil {
			s, c, perr := ovssandbox.ParseEchoReply(reply)
			if perr != nil {
				w.t.Fatal(perr)
			}
			return s, c
		}
		if time.Now().After(deadline) {
			extra := ""
			if diag != nil {
				extra = diag()
			}
			w.t.Fatalf("%s -> %s: %v\n%s", from.Name, addr, err, extra)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// unanswered checks that nothing answers a connection from ns to addr.
func (w *world) unanswered(from *ovssandbox.NetNS, addr string) {
	w.t.Helper()
	reply, err := w.echo.Dial(context.Background(), from, "tcp", addr, time.Second)
	if err == nil {
		w.t.Fatalf("%s -> %s was answered (%q) but must not be", from.Name, addr, reply)
	}
}

func (n *node) diag() string {
	return fmt.Sprintf("node %s flows:\n%s\nnft:\n%s\nroutes:\n%s", n.name, n.flows(0), n.nft(), n.routes())
}

func host(addrPort string) string { return addrPort[:strings.LastIndex(addrPort, ":")] }

// Service objects.

type svcSpec struct {
	name, clusterIP string
	nodePort        int32
	ingress         []v1.LoadBalancerIngress
	externalIPs     []string
}

func (w *world) addService(s svcSpec, eps map[string]string) {
	w.t.Helper()
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: s.name},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: s.clusterIP, ClusterIPs: []string{s.clusterIP},
			ExternalIPs: s.externalIPs,
			Ports:       []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080), NodePort: s.nodePort}}}}
	if s.nodePort != 0 {
		svc.Spec.Type = v1.ServiceTypeNodePort
	}
	if s.ingress != nil {
		svc.Spec.Type = v1.ServiceTypeLoadBalancer
		svc.Status.LoadBalancer.Ingress = s.ingress
	}
	ctx := context.Background()
	if _, err := w.cs.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
	port, proto, portName := int32(8080), v1.ProtocolTCP, "http"
	slice := &discovery.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: s.name + "-1",
		Labels: map[string]string{discovery.LabelServiceName: s.name}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: &portName, Port: &port, Protocol: &proto}}}
	for ip, nodeName := range eps {
		ready := true
		nn := nodeName
		slice.Endpoints = append(slice.Endpoints, discovery.Endpoint{Addresses: []string{ip}, NodeName: &nn,
			Conditions: discovery.EndpointConditions{Ready: &ready, Serving: &ready, Terminating: new(bool)}})
	}
	if _, err := w.cs.DiscoveryV1().EndpointSlices("default").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

func vip(ip string) v1.LoadBalancerIngress {
	m := v1.LoadBalancerIPModeVIP
	return v1.LoadBalancerIngress{IP: ip, IPMode: &m}
}

func proxyMode(ip string) v1.LoadBalancerIngress {
	m := v1.LoadBalancerIPModeProxy
	return v1.LoadBalancerIngress{IP: ip, IPMode: &m}
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitServices waits until the node's proxier has installed n Services.
func (n *node) waitServices(count int) {
	waitFor(n.w.t, 20*time.Second, fmt.Sprintf("%s: %d Services installed", n.name, count), func() bool { return len(n.px.Services()) == count })
}
