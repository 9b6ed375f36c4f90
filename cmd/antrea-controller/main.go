// Command antrea-controller is antrea-proxy's LoadBalancer IP provider: it
// hands out addresses from the pools of antrea-controller.conf to
// LoadBalancer Services, picks the node that announces each VIP-mode
// address and reports KEP-4631 status conditions (see pkg/loadbalancer).
//
// `antrea-controller cleanup-finalizers` removes what the controller wrote
// on Services (finalizer, announcing-node annotation, ingress, conditions);
// the chart's uninstall hook runs it so that no Service is left stuck.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	"github.com/antrea-proxy/antrea-proxy/pkg/httpserver"
	"github.com/antrea-proxy/antrea-proxy/pkg/k8sclient"
	"github.com/antrea-proxy/antrea-proxy/pkg/loadbalancer"
	"github.com/antrea-proxy/antrea-proxy/pkg/loadbalancer/ipam"
	"github.com/antrea-proxy/antrea-proxy/pkg/version"
)

// resyncPeriod is the informers' full resync period.
const resyncPeriod = 10 * time.Minute

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "antrea-controller: %v\n", err)
		klog.Flush()
		os.Exit(1)
	}
}

// leaderHealthTimeout is how long past its renew deadline a leader that
// has not renewed its Lease stays healthy (client-go's HealthzAdaptor).
const leaderHealthTimeout = 20 * time.Second

// options are the command-line flags.
type options struct {
	configPath  string
	kubeconfig  string
	bindAddress string
	leaderElect bool
	workers     int
	showVersion bool
}

func parseFlags(args []string) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("antrea-controller", flag.ContinueOnError)
	fs.StringVar(&o.configPath, "config", "/etc/antrea/antrea-controller.conf", "path of antrea-controller.conf")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file; overrides the config file's kubeconfig; empty means in-cluster")
	fs.StringVar(&o.bindAddress, "bind-address", "", "IP:port of /healthz, /readyz and /metrics; overrides the config file's bindAddress")
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "use Lease-based leader election (also requires leaderElection.enable in the config); disable only for tests or a single replica")
	fs.IntVar(&o.workers, "workers", loadbalancer.DefaultWorkers, "number of Services synced in parallel")
	fs.BoolVar(&o.showVersion, "version", false, "print the version and exit")
	klog.InitFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return o, nil
}

func run(args []string) error {
	if len(args) > 0 && args[0] == cleanupCommand {
		return runCleanup(args[1:])
	}
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	if o.showVersion {
		fmt.Println("antrea-controller", version.Version)
		return nil
	}
	cfg, err := config.LoadController(o.configPath)
	if err != nil {
		return err
	}
	pools, err := loadbalancer.NewPools(cfg.IPPools)
	if err != nil {
		return fmt.Errorf("config %s: %w", o.configPath, err)
	}
	if o.kubeconfig != "" {
		cfg.Kubeconfig = o.kubeconfig
	}
	if o.bindAddress != "" {
		if _, err := netip.ParseAddrPort(o.bindAddress); err != nil {
			return fmt.Errorf("--bind-address %q is not an IP:port", o.bindAddress)
		}
		cfg.BindAddress = o.bindAddress
	}
	client, err := newClient(cfg.Kubeconfig, cfg.KubeAPIServerOverride)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return serve(ctx, o, cfg, client, pools)
}

// serve runs the controller (under leader election unless disabled) and its HTTP endpoints
// until ctx is done or the controller ends.
func serve(ctx context.Context, o *options, cfg *config.ControllerConfig, client kubernetes.Interface, pools []*ipam.Pool) error {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartStructuredLogging(0)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: "antrea-controller"})

	factory := informers.NewSharedInformerFactory(client, resyncPeriod)
	metrics := loadbalancer.NewMetrics()
	lbOpts := loadbalancer.Options{
		Class: cfg.LoadBalancerClass, Pools: pools, Recorder: recorder, Workers: o.workers, Metrics: metrics,
		ReleaseGrace: cfg.ReleaseGracePeriod.Duration,
	}
	if cfg.AnnouncerLeases.Enabled() {
		lbOpts.AnnouncerLeaseNamespace = cfg.AnnouncerLeases.Namespace
	}
	ctrl, err := loadbalancer.New(client, factory, lbOpts)
	if err != nil {
		return err
	}
	runController := func(ctx context.Context) error {
		factory.Start(ctx.Done())
		defer factory.Shutdown()
		return ctrl.Run(ctx)
	}
	le := cfg.LeaderElection
	elect := o.leaderElect && le.Enabled()
	httpOpts := loadbalancer.HTTPOptions{Controller: ctrl, Metrics: metrics}
	var status loadbalancer.LeaderStatus
	watchDog := leaderelection.NewLeaderHealthzAdaptor(leaderHealthTimeout)
	if elect {
		httpOpts.Leading, httpOpts.LeaderCheck = status.Leading, watchDog.Check
	}
	if err := metrics.RegisterLeader(func() bool { return !elect || status.Leading() }); err != nil {
		return err
	}
	httpLimiter := httpserver.DefaultLimiter("controller")
	if err := metrics.Registry().Register(httpserver.Collector(loadbalancer.MetricsNamespace, httpLimiter)); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.BindAddress)
	if err != nil {
		return fmt.Errorf("listening for /healthz, /readyz and /metrics: %w", err)
	}
	serveDone := make(chan error, 1)
	go func() { serveDone <- httpserver.Serve(ctx, ln, loadbalancer.NewHTTPHandler(httpOpts), httpLimiter) }()
	defer func() { <-serveDone }()
	defer stop() // runs first: stops the HTTP server also when the controller ended on its own

	klog.InfoS("Starting antrea-controller", "version", version.Version, "class", cfg.LoadBalancerClass,
		"pools", len(pools), "leaderElection", elect, "bindAddress", ln.Addr().String())
	if !elect {
		return runController(ctx)
	}
	host, _ := os.Hostname()
	return loadbalancer.RunLeaderElected(ctx, client, loadbalancer.LeaderElection{
		Namespace:     le.LeaseNamespace,
		Name:          le.LeaseName,
		Identity:      host + "_" + rand.String(8),
		LeaseDuration: le.LeaseDuration.Duration,
		RenewDeadline: le.RenewDeadline.Duration,
		RetryPeriod:   le.RetryPeriod.Duration,
		Status:        &status,
		WatchDog:      watchDog,
	}, runController)
}

// newClient builds the Kubernetes client from a kubeconfig ("" means in-cluster) and an
// optional kube-apiserver override.
func newClient(kubeconfig, override string) (kubernetes.Interface, error) {
	rc, err := k8sclient.Build(k8sclient.Options{Kubeconfig: kubeconfig, APIServerOverride: override})
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("building Kubernetes client: %w", err)
	}
	return client, nil
}
