package framework

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// ControlPlaneOptions tune StartControlPlane. The zero value is a working control plane.
type ControlPlaneOptions struct {
	// ServiceCIDR is kube-apiserver's --service-cluster-ip-range. Default 10.96.0.0/16.
	ServiceCIDR string
	// ClusterCIDR is the Pod range nodeipam carves Node podCIDRs from. Default 10.244.0.0/16.
	ClusterCIDR string
	// NodeCIDRMaskSize is the prefix length of each Node's podCIDR. Default 24.
	NodeCIDRMaskSize int
	// DualStack makes the cluster IPv4/IPv6 dual-stack: ServiceCIDR and ClusterCIDR default to
	// DualStackServiceCIDR and DualStackClusterCIDR ("v4,v6" lists), and nodeipam gives every
	// Node an IPv4 podCIDR of NodeCIDRMaskSize bits and an IPv6 one of NodeCIDRMaskSizeIPv6 bits.
	DualStack bool
	// NodeCIDRMaskSizeIPv6 is the prefix length of each Node's IPv6 podCIDR with DualStack.
	// Default 64.
	NodeCIDRMaskSizeIPv6 int
	// ExtraServingIPs and ExtraServingNames are added to kube-apiserver's serving certificate, for
	// clients that reach it through another address.
	ExtraServingIPs   []net.IP
	ExtraServingNames []string
	// ExtraAPIServerArgs and ExtraControllerManagerArgs are appended to the components' flags; a
	// repeated flag overrides the framework's value.
	ExtraAPIServerArgs         []string
	ExtraControllerManagerArgs []string
	// StartTimeout bounds how long each component may take to become ready. Default 2 minutes.
	StartTimeout time.Duration
	// LogSubdir puts the logs into this subdirectory of the test's log directory: for a test
	// that runs more than one sandbox.
	LogSubdir string
}

// Dual-stack defaults (ULA ranges; see ControlPlaneOptions.DualStack).
const (
	DualStackServiceCIDR = "10.96.0.0/16,fd00:10:96::/112"
	DualStackClusterCIDR = "10.244.0.0/16,fd00:10:244::/56"
)

func (o *ControlPlaneOptions) defaults() {
	if o.ServiceCIDR == "" {
		o.ServiceCIDR = "10.96.0.0/16"
		if o.DualStack {
			o.ServiceCIDR = DualStackServiceCIDR
		}
	}
	if o.ClusterCIDR == "" {
		o.ClusterCIDR = "10.244.0.0/16"
		if o.DualStack {
			o.ClusterCIDR = DualStackClusterCIDR
		}
	}
	if o.NodeCIDRMaskSizeIPv6 == 0 {
		o.NodeCIDRMaskSizeIPv6 = 64
	}
	if o.NodeCIDRMaskSize == 0 {
		o.NodeCIDRMaskSize = 24
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 2 * time.Minute
	}
}

// ControlPlane is a running etcd, kube-apiserver and kube-controller-manager.
type ControlPlane struct {
	// Dir holds the certificates, etcd's data and the kubeconfigs; it is removed when the test ends.
	Dir string
	// LogDir holds one log per component (etcd.log, kube-apiserver.log, kube-controller-manager.log);
	// it is kept after the test and replaced when the same test runs again.
	LogDir string
	// BinDir is where the component binaries were found.
	BinDir string
	// APIServerURL is https://127.0.0.1:<port>.
	APIServerURL string
	// EtcdURL is http://127.0.0.1:<port> (loopback only; kube-apiserver is its only client).
	EtcdURL string
	// ServiceCIDR and ClusterCIDR are the flags' values: one CIDR, or "v4,v6" when dual-stack.
	ServiceCIDR, ClusterCIDR string
	// CA signs every certificate of the sandbox and is kube-apiserver's client CA; CAFile is it on disk.
	CA     *CertAuthority
	CAFile string
	// AdminKubeconfig authenticates as kubernetes-admin in group system:masters.
	AdminKubeconfig string
	// Config and Client are the admin's.
	Config *rest.Config
	Client *kubernetes.Clientset

	opts ControlPlaneOptions

	mu         sync.Mutex
	procs      []*process
	kubeconfig int
}

// StartControlPlane starts etcd, kube-apiserver and kube-controller-manager on random free ports
// of 127.0.0.1, waits until the API is ready and the controllers run, and stops them all when the
// test ends (printing each component's log tail if the test failed). Missing binaries are built
// under CI=true; otherwise the test fails saying how to build them.
func StartControlPlane(t testing.TB, opts ControlPlaneOptions) *ControlPlane {
	t.Helper()
	opts.defaults()
	binDir := EnsureControlPlaneBinaries(t)
	removeOrphanedDirs(t)
	dir, err := os.MkdirTemp("", tempDirPrefix)
	if err != nil {
		t.Fatalf("creating the control plane's directory: %v", err)
	}
	// The owner's pid lets a later run remove this directory if this test binary is killed before
	// its cleanups run (its processes die with it: see startProcess).
	if err := os.WriteFile(filepath.Join(dir, ownerPIDFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		_ = os.RemoveAll(dir)
		t.Fatalf("writing the control plane's owner pid: %v", err)
	}
	logDir, err := testLogDir(t, opts.LogSubdir)
	if err != nil {
		_ = os.RemoveAll(dir)
		t.Fatal(err)
	}
	cp := &ControlPlane{
		Dir: dir, LogDir: logDir, BinDir: binDir,
		ServiceCIDR: opts.ServiceCIDR, ClusterCIDR: opts.ClusterCIDR,
		opts: opts,
	}
	t.Cleanup(func() { cp.stop(t) })
	start := time.Now()
	if err := cp.start(t); err != nil {
		t.Fatalf("starting the control plane (logs in %s): %v", logDir, err)
	}
	t.Logf("control plane ready in %v: kube-apiserver %s, logs in %s", time.Since(start).Round(time.Millisecond), cp.APIServerURL, logDir)
	return cp
}

const (
	tempDirPrefix = "e2e-cp-"
	ownerPIDFile  = "owner.pid"
)

// removeOrphanedDirs deletes control-plane directories left by test binaries that were killed
// before their cleanups ran: those whose owner process no longer exists.
func removeOrphanedDirs(t testing.TB) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), tempDirPrefix+"*"))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, ownerPIDFile))
		if err != nil {
			continue // not (yet) owned: another test may be creating it right now
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			continue
		}
		if err := os.RemoveAll(d); err == nil {
			t.Logf("removed %s, left behind by killed test process %d", d, pid)
		}
	}
}

// testLogDir is $E2E_LOG_DIR/<test name>[/<subdir>], by default
// <repo>/_output/e2e-logs/<test name>[/<subdir>], emptied.
func testLogDir(t testing.TB, subdir string) (string, error) {
	base := os.Getenv("E2E_LOG_DIR")
	if base == "" {
		root, err := RepoRoot()
		if err != nil {
			return "", fmt.Errorf("locating the repository for the log directory: %w", err)
		}
		base = filepath.Join(root, "_output", "e2e-logs")
	}
	dir := filepath.Join(base, strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()), subdir)
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("clearing the log directory %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating the log directory %s: %w", dir, err)
	}
	return dir, nil
}

func (cp *ControlPlane) start(t testing.TB) error {
	if err := cp.writeCerts(); err != nil {
		return err
	}
	if err := retryOnPortClash(t, "etcd", cp.startEtcd); err != nil {
		return err
	}
	if err := retryOnPortClash(t, "kube-apiserver", cp.startAPIServer); err != nil {
		return err
	}
	if err := cp.connectAdmin(); err != nil {
		return err
	}
	if err := retryOnPortClash(t, "kube-controller-manager", cp.startControllerManager); err != nil {
		return err
	}
	// The serviceaccount controller, running with its own service-account credentials, creates the
	// default ServiceAccount: proof that kube-controller-manager talks to the API and its controllers run.
	return Poll(context.Background(), cp.opts.StartTimeout, "kube-controller-manager to create ServiceAccount default/default",
		func(ctx context.Context) (bool, string, error) {
			_, err := cp.Client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, "", nil
			}
			if err != nil {
				return false, err.Error(), nil
			}
			return true, "", nil
		})
}

// retryOnPortClash runs start up to three times while it fails because a chosen port was taken.
func retryOnPortClash(t testing.TB, name string, start func() error) error {
	for attempt := 1; ; attempt++ {
		err := start()
		if err == nil || !errors.Is(err, errPortInUse) || attempt == 3 {
			return err
		}
		t.Logf("%s: a port was taken before it could bind it; retrying on new ports (%v)", name, err)
	}
}

// path returns a file name inside Dir.
func (cp *ControlPlane) path(name string) string { return filepath.Join(cp.Dir, name) }

// launch starts a component binary and records it for stop.
func (cp *ControlPlane) launch(name string, args []string) (*process, error) {
	p, err := startProcess(name, filepath.Join(cp.LogDir, name+".log"), filepath.Join(cp.BinDir, name), args...)
	if err != nil {
		return nil, err
	}
	cp.mu.Lock()
	cp.procs = append(cp.procs, p)
	cp.mu.Unlock()
	return p, nil
}

// stop ends every component, newest first, prints log tails if the test failed and removes Dir.
func (cp *ControlPlane) stop(t testing.TB) {
	cp.mu.Lock()
	procs := cp.procs
	cp.procs = nil
	cp.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].Stop()
	}
	if t.Failed() {
		for _, p := range procs {
			t.Logf("---- %s: last 40 lines of %s ----\n%s", p.Name, p.LogPath, lastLines(p.logTail(256<<10), 40))
		}
	}
	if err := os.RemoveAll(cp.Dir); err != nil {
		t.Errorf("removing the control plane's directory %s: %v", cp.Dir, err)
	}
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// KubeconfigFor mints a client certificate for user in groups and writes a kubeconfig with it,
// returning its path (inside Dir). With no groups the identity has only what RBAC grants user
// and system:authenticated.
func (cp *ControlPlane) KubeconfigFor(user string, groups ...string) (string, error) {
	kp, err := cp.CA.IssueClient(user, groups)
	if err != nil {
		return "", err
	}
	cp.mu.Lock()
	cp.kubeconfig++
	n := cp.kubeconfig
	cp.mu.Unlock()
	safe := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' {
			return r
		}
		return '_'
	}, user)
	path := cp.path(fmt.Sprintf("kubeconfig-%02d-%s", n, safe))
	if err := WriteKubeconfig(path, cp.APIServerURL, cp.CA.CertPEM, kp); err != nil {
		return "", err
	}
	return path, nil
}

// ClientFor is KubeconfigFor turned into a clientset and its config; it fails t on error.
func (cp *ControlPlane) ClientFor(t testing.TB, user string, groups ...string) (*kubernetes.Clientset, *rest.Config) {
	t.Helper()
	path, err := cp.KubeconfigFor(user, groups...)
	if err != nil {
		t.Fatalf("minting a kubeconfig for user %q groups %q: %v", user, groups, err)
	}
	cfg, err := LoadRESTConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("building a clientset for user %q: %v", user, err)
	}
	return cs, cfg
}

// ClusterCIDRs is ClusterCIDR split into its CIDRs (one per family).
func (cp *ControlPlane) ClusterCIDRs() []string { return splitCIDRs(cp.ClusterCIDR) }

// DualStack reports whether the control plane was started dual-stack.
func (cp *ControlPlane) DualStack() bool { return cp.opts.DualStack }

func splitCIDRs(list string) []string {
	var out []string
	for _, c := range strings.Split(list, ",") {
		if c = strings.TrimSpace(c); c != "" {
			out = append(out, c)
		}
	}
	return out
}
