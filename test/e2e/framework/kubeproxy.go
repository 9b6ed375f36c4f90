package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// This file holds the kube-proxy node kind (SandboxOptions.Proxy = ProxyKubeProxy): the
// reference the conformance suite (test/conformance) compares antrea-proxy with. Such a node has
// no Open vSwitch and no antrea-agent: its pods are veth pairs on a plain Linux bridge (see
// bridgenet.go) and kube-proxy v1.37 (built from hack/tools into _output/bin) programs the
// node's Services in nftables mode.

// NodeProxy is what implements Services on the sandbox's nodes.
type NodeProxy string

const (
	// ProxyAntrea nodes run Open vSwitch and antrea-agent (proxyAll), with antrea-cni pods.
	ProxyAntrea NodeProxy = ""
	// ProxyKubeProxy nodes run kube-proxy in nftables mode, with pods on a Linux bridge.
	ProxyKubeProxy NodeProxy = "kube-proxy"
)

// KubeProxyUser is the identity of every kube-proxy node's kube-proxy; the sandbox binds it to
// the bootstrap ClusterRole system:node-proxier (what kube-proxy needs, and nothing more).
const KubeProxyUser = "e2e-kube-proxy"

// kubeProxyHealthz is where kube-proxy serves /healthz inside its node (its default port, bound
// to the node's loopback here).
const kubeProxyHealthz = "127.0.0.1:10256"

// kubeProxyMetrics is kube-proxy's default metrics address.
const kubeProxyMetrics = "127.0.0.1:10249"

// grantKubeProxyRBAC binds system:node-proxier to KubeProxyUser.
func grantKubeProxyRBAC(ctx context.Context, cs kubernetes.Interface) error {
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: KubeProxyUser},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:node-proxier"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: KubeProxyUser}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating ClusterRoleBinding %s: %w", KubeProxyUser, err)
	}
	return nil
}

// KubeProxyOptions configure the kube-proxy nodes (SandboxOptions.KubeProxy).
type KubeProxyOptions struct {
	// SyncPeriod is nftables.syncPeriod, how often kube-proxy resyncs; 0 means 30s (the
	// agents' FullSyncPeriod).
	SyncPeriod time.Duration
	// MinSyncPeriod is nftables.minSyncPeriod, the least time between two syncs; 0 means
	// 200ms (the agents' default MinSyncInterval), so that both kinds program a change in
	// about the same time.
	MinSyncPeriod time.Duration
	// StartTimeout bounds kube-proxy's start until /healthz reports its first sync; 0 means 2
	// minutes. Tens of thousands of Services (test/bench) take minutes for that first sync.
	StartTimeout time.Duration
}

// Defaults fills the unset fields.
func (o *KubeProxyOptions) Defaults() {
	if o.SyncPeriod == 0 {
		o.SyncPeriod = 30 * time.Second
	}
	if o.MinSyncPeriod == 0 {
		o.MinSyncPeriod = 200 * time.Millisecond
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 2 * time.Minute
	}
}

// kubeProxyConfig is the node's KubeProxyConfiguration (kubeproxy.config.k8s.io/v1alpha1, where
// the sync periods are per mode: nftables.syncPeriod and nftables.minSyncPeriod). Only what the
// sandbox needs differs from kube-proxy's defaults: the mode, the kubeconfig, the Node name, the
// cluster CIDR (the default "local traffic" detection), the addresses it serves on and the sync
// periods (opts). nodePortAddresses is left to its default (the node's primary IPs in nftables
// mode). The conntrack limits are set to leave the kernel's values alone: nf_conntrack_max and
// its hash size are global to the machine, not the node's namespace, and the test must not
// change the host.
func (n *Node) kubeProxyConfig(kubeconfig string, opts KubeProxyOptions) ([]byte, error) {
	opts.Defaults()
	zero := "0s"
	cfg := map[string]any{
		"apiVersion":       "kubeproxy.config.k8s.io/v1alpha1",
		"kind":             "KubeProxyConfiguration",
		"mode":             "nftables",
		"hostnameOverride": n.Name,
		"clusterCIDR":      strings.Join(n.s.CP.ClusterCIDRs(), ","),
		"clientConnection": map[string]any{"kubeconfig": kubeconfig},
		// Loopback of the node's namespace, like the defaults' ports.
		"healthzBindAddress": kubeProxyHealthz,
		"metricsBindAddress": kubeProxyMetrics,
		"oomScoreAdj":        0,
		"conntrack": map[string]any{
			"maxPerCore": 0, "min": 0,
			"tcpEstablishedTimeout": zero, "tcpCloseWaitTimeout": zero,
		},
		"nftables": map[string]any{
			"syncPeriod":    opts.SyncPeriod.String(),
			"minSyncPeriod": opts.MinSyncPeriod.String(),
		},
	}
	return json.MarshalIndent(cfg, "", "  ")
}

// kubeProxyLenientMarkers are what kube-proxy logs when its configuration file does not decode
// strictly (an unknown or duplicate field): it then falls back to lenient decoding and silently
// ignores the field.
var kubeProxyLenientMarkers = []string{"strict decoding", "unknown field"}

// checkKubeProxyLog fails when kube-proxy's log shows that it ignored part of its configuration.
func checkKubeProxyLog(log []byte) error {
	for _, line := range strings.Split(string(log), "\n") {
		for _, m := range kubeProxyLenientMarkers {
			if strings.Contains(line, m) {
				return fmt.Errorf("kube-proxy did not accept its whole configuration: %s", strings.TrimSpace(line))
			}
		}
	}
	return nil
}

// startKubeProxy writes the node's kubeconfig (as KubeProxyUser) and KubeProxyConfiguration and
// runs kube-proxy inside the node namespace, waiting until its /healthz reports a first sync.
func (n *Node) startKubeProxy() error {
	kp, err := n.s.CP.CA.IssueClient(KubeProxyUser, nil)
	if err != nil {
		return err
	}
	n.Kubeconfig = filepath.Join(n.Dir, "kube-proxy.kubeconfig")
	if err := WriteKubeconfig(n.Kubeconfig, "https://"+nodeAPIServerAddr, n.s.CP.CA.CertPEM, kp); err != nil {
		return err
	}
	b, err := n.kubeProxyConfig(n.Kubeconfig, n.s.kubeProxy)
	if err != nil {
		return err
	}
	n.ConfPath = filepath.Join(n.Dir, "kube-proxy.conf")
	if err := os.WriteFile(n.ConfPath, b, 0o644); err != nil {
		return fmt.Errorf("node %s: writing %s: %w", n.Name, n.ConfPath, err)
	}
	p, err := n.s.startInNS("kube-proxy-"+n.Name, n.NS, filepath.Join(n.s.CP.BinDir, "kube-proxy"),
		"--config", n.ConfPath, "--v=2")
	if err != nil {
		return err
	}
	n.agent = p
	what := fmt.Sprintf("kube-proxy on %s to report healthy on %s (log %s)", n.Name, kubeProxyHealthz, p.LogPath)
	opts := n.s.kubeProxy
	opts.Defaults()
	if err := waitReady(p, opts.StartTimeout, what, func(ctx context.Context) (bool, string) {
		code, body, err := n.NS.HTTPStatus(ctx, "http://"+kubeProxyHealthz+"/healthz")
		if err != nil {
			return false, err.Error()
		}
		return code == 200, fmt.Sprintf("HTTP %d: %s", code, body)
	}); err != nil {
		return err
	}
	// The configuration is decoded before anything else, so its warning is in the log by now.
	if err := checkKubeProxyLog(p.logTail(4 << 20)); err != nil {
		return fmt.Errorf("node %s (%s, log %s): %w", n.Name, n.ConfPath, p.LogPath, err)
	}
	return nil
}

// KubeProxyRuleset is the node's nftables table "ip kube-proxy" (what kube-proxy programmed for
// IPv4), as `nft list table` prints it.
func (n *Node) KubeProxyRuleset() (string, error) {
	// rulesetListTimeout bounds the listing: 2 min 14 s at 30,000 Services × 10 endpoints.
	const rulesetListTimeout = 10 * time.Minute
	out, err := n.NS.ExecFor(rulesetListTimeout, "nft", "list", "table", "ip", "kube-proxy")
	if err != nil {
		return "", fmt.Errorf("node %s: listing kube-proxy's table: %w: %s", n.Name, err, out)
	}
	return out, nil
}

// KubeProxySyncs returns kube-proxy's metric values of the last successful sync and the last
// time a change was queued (seconds since the epoch): when the first is not before the second,
// every change kube-proxy has seen is programmed. kube-proxy labels both series by IP family;
// of several families the pair returned is the one furthest behind.
func (n *Node) KubeProxySyncs(ctx context.Context) (lastSync, lastQueued float64, err error) {
	return n.ProxySyncs(ctx, KubeProxyMetricsPrefix)
}

// ProxySyncs is KubeProxySyncs for the proxy of the node whose metric names start with prefix
// (KubeProxyMetricsPrefix, or AntreaProxyMetricsPrefix: antrea-agent exports the same two
// gauges, unlabelled), both served at kube-proxy's default metrics address.
func (n *Node) ProxySyncs(ctx context.Context, prefix string) (lastSync, lastQueued float64, err error) {
	body, err := n.NS.HTTPGet(ctx, "http://"+kubeProxyMetrics+"/metrics")
	if err != nil {
		return 0, 0, err
	}
	lastSync, lastQueued, ok := syncsFrom(body, prefix)
	if !ok {
		return 0, 0, fmt.Errorf("node %s: the proxy's metrics have no %s series", n.Name, prefix+lastSyncGauge)
	}
	return lastSync, lastQueued, nil
}

// Metric name prefixes of the two proxies, and the gauges ProxySyncs reads.
const (
	KubeProxyMetricsPrefix   = "kubeproxy_"
	AntreaProxyMetricsPrefix = "antrea_proxy_"
	lastSyncGauge            = "sync_proxy_rules_last_timestamp_seconds"
	lastQueuedGauge          = "sync_proxy_rules_last_queued_timestamp_seconds"
)

// syncsFrom reads the last-sync and last-queued gauges named with prefix from a metrics
// exposition, per label set (ip_family="IPv4", or none), and returns the pair of the label set
// with the least lastSync - lastQueued; ok is false when there is no last-sync series.
func syncsFrom(body []byte, prefix string) (lastSync, lastQueued float64, ok bool) {
	type pair struct{ sync, queued float64 }
	byLabels := map[string]*pair{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name, labels, _ := strings.Cut(f[0], "{")
		if name != prefix+lastSyncGauge && name != prefix+lastQueuedGauge {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			continue
		}
		p := byLabels[labels]
		if p == nil {
			p = &pair{}
			byLabels[labels] = p
		}
		if name == prefix+lastSyncGauge {
			p.sync, ok = v, true
		} else {
			p.queued = v
		}
	}
	first := true
	for _, p := range byLabels {
		if first || p.sync-p.queued < lastSync-lastQueued {
			lastSync, lastQueued, first = p.sync, p.queued, false
		}
	}
	return lastSync, lastQueued, ok
}

// startKubeProxies routes the pod networks between the nodes, grants kube-proxy its role and
// starts it on every node.
func (s *Sandbox) startKubeProxies() error {
	for _, n := range s.Nodes {
		if err := n.routePodCIDRs(s.Nodes); err != nil {
			return err
		}
	}
	if err := grantKubeProxyRBAC(context.Background(), s.CP.Client); err != nil {
		return err
	}
	return s.forEachNode(func(n *Node) error { return n.startKubeProxy() })
}
