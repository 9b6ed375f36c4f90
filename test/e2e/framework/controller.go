package framework

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/antrea-proxy/antrea-proxy/pkg/config"
)

// ControllerUser is the identity antrea-controller runs as in the sandbox; ControllerClusterRole
// is bound to it.
const (
	ControllerUser        = "antrea-controller"
	ControllerClusterRole = "antrea-controller"
)

// LBController is the real antrea-controller (cmd/antrea-controller) running against the
// sandbox's apiserver with its own identity and antrea-controller.conf.
type LBController struct {
	Config     *config.ControllerConfig
	ConfPath   string
	Kubeconfig string
	// Addr is the loopback host:port of its /healthz, /readyz and /metrics (a free port, so
	// that sandboxes running at the same time never contend for the default 0.0.0.0:10351).
	Addr string
	proc *process
}

// LBPool is a pool of the controller's configuration.
type LBPool struct {
	Name   string
	CIDRs  []netip.Prefix
	Ranges []string
	// Proxy makes it an ipMode Proxy pool; otherwise VIP.
	Proxy bool
}

// StartLBController builds antrea-controller, grants ControllerClusterRole to ControllerUser,
// writes antrea-controller.conf with pools and runs the controller (without leader election: a
// single replica) until the sandbox stops. It returns once the controller has started.
func (s *Sandbox) StartLBController(ctx context.Context, pools ...LBPool) (*LBController, error) {
	bin := filepath.Join(s.Bins.Dir, "antrea-controller")
	if err := buildController(bin); err != nil {
		return nil, err
	}
	if err := grantControllerRBAC(ctx, s.CP.Client); err != nil {
		return nil, err
	}
	kubeconfig, err := s.CP.KubeconfigFor(ControllerUser)
	if err != nil {
		return nil, err
	}
	off := false
	cfg := &config.ControllerConfig{Kubeconfig: kubeconfig, LeaderElection: config.LeaderElectionConfig{Enable: &off}}
	for _, p := range pools {
		ip := config.IPPool{Name: p.Name, Ranges: p.Ranges, IPMode: config.IPModeVIP}
		if p.Proxy {
			ip.IPMode = config.IPModeProxy
		}
		for _, c := range p.CIDRs {
			ip.CIDRs = append(ip.CIDRs, c.String())
		}
		cfg.IPPools = append(cfg.IPPools, ip)
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	// The file must load as antrea-controller loads it.
	if _, err := config.ParseController(b); err != nil {
		return nil, fmt.Errorf("antrea-controller.conf for the sandbox: %w", err)
	}
	confPath := filepath.Join(s.Dir, "antrea-controller.conf")
	if err := os.WriteFile(confPath, b, 0o644); err != nil {
		return nil, err
	}
	c := &LBController{Config: cfg, ConfPath: confPath, Kubeconfig: kubeconfig}
	if _, err := s.RestartLBController(c); err != nil {
		return nil, err
	}
	return c, nil
}

// LogTail returns the last lines of the controller's log.
func (c *LBController) LogTail(lines int) string { return lastLines(c.proc.logTail(256<<10), lines) }

// buildController builds cmd/antrea-controller to path (seconds with a warm build cache).
func buildController(path string) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool(), "build", "-o", path, "./cmd/antrea-controller")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building antrea-controller: %w\n%s", err, out)
	}
	return nil
}

// grantControllerRBAC creates ControllerClusterRole (what antrea-controller needs: read Nodes,
// Namespaces and EndpointSlices, update Services and their status, record Events, use Leases) and binds it
// to ControllerUser.
func grantControllerRBAC(ctx context.Context, cs kubernetes.Interface) error {
	read := []string{"get", "list", "watch"}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: ControllerClusterRole},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: append(read, "update", "patch")},
			{APIGroups: []string{""}, Resources: []string{"services/status"}, Verbs: []string{"update", "patch"}},
			{APIGroups: []string{""}, Resources: []string{"nodes", "namespaces"}, Verbs: read},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: read},
			{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: append(read, "create", "update")},
		},
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating ClusterRole %s: %w", ControllerClusterRole, err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ControllerClusterRole},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ControllerClusterRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: ControllerUser}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating ClusterRoleBinding %s: %w", ControllerClusterRole, err)
	}
	return nil
}

// RouteOnLink makes the client and the router reach prefix directly on the underlay, so that
// ARP decides which node receives its addresses (the node announcing them). A prefix inside
// VIPRange overrides RouteVIPs for its addresses only (longest match).
func (nw *Network) RouteOnLink(prefix netip.Prefix) error {
	for _, ns := range []*NetNS{nw.Client, nw.Router} {
		if err := ns.MustExec([]string{"ip", "route", "replace", prefix.String(), "dev", "eth0"}); err != nil {
			return err
		}
	}
	return nil
}

// NeighborMAC returns the MAC address ns has resolved for ip on eth0, "" if none.
func (n *NetNS) NeighborMAC(ip netip.Addr) (string, error) {
	out, err := n.Exec("ip", "neigh", "show", ip.String(), "dev", "eth0")
	if err != nil {
		return "", fmt.Errorf("%s: ip neigh show %s: %w: %s", n.Name, ip, err, out)
	}
	f := strings.Fields(out)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "lladdr" {
			return f[i+1], nil
		}
	}
	return "", nil
}

// UplinkMAC returns the MAC address of the node's underlay interface eth0.
func (n *Node) UplinkMAC() (string, error) {
	out, err := n.NS.Exec("cat", "/sys/class/net/eth0/address")
	if err != nil {
		return "", fmt.Errorf("node %s: reading eth0's MAC: %w: %s", n.Name, err, out)
	}
	return strings.TrimSpace(out), nil
}
