// Package agent wires antrea-agent together: it connects to OVSDB, ensures the bridge, builds
// the OpenFlow bridge client and runs AntreaProxy with the settings of antrea-agent.conf.
package agent

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver"
	"github.com/antrea-proxy/antrea-proxy/pkg/cni/server"
	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/conntrack"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/native"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/ofctl"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/ovsdb"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/metrics"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/observe"
	"github.com/antrea-proxy/antrea-proxy/pkg/reconciler"
)

// Components are the agent's long-lived parts, for callers that want to reach them (the API).
type Components struct {
	OVSDB *ovsdb.Client
	// Bridge programs and counts the bridge's flows, with the configured OpenFlow backend
	// (ovsOpenFlowBackend).
	Bridge flowBridge
	// nativeOF is the native OpenFlow connection behind Bridge; nil with the ofctl backend.
	nativeOF *native.Bridge
	Proxier  *proxy.Proxier
	// DataPath is the node data path (gateway, routes, nftables, CNI); nil when disabled.
	DataPath *DataPath
	// observers watch the proxier's syncs (metrics, health checks).
	observers *observers
	// rejectLimits installs the reject meters; nil when they could not be.
	rejectLimits *rejectLimits
	// bridgeState is the bridge's reconciler: the installed flows and groups of the gateway,
	// the pods and the proxier (when AntreaProxy is enabled).
	bridgeState *reconciler.Reconciler
}

// Setup connects to OVS, ensures the bridge and builds the proxier. events receives the
// proxier's Warning Events on Services; nil means none.
func Setup(ctx context.Context, cfg *config.AgentConfig, events proxy.EventSink) (*Components, error) {
	endpoint := "unix:" + filepath.Join(cfg.OVSRunDir, "db.sock")
	db, err := ovsdb.New(ctx, endpoint)
	if err != nil {
		return nil, fmt.Errorf("connecting to OVSDB at %s: %w", endpoint, err)
	}
	if err := db.EnsureBridge(ctx, ovsdb.BridgeConfig{Name: cfg.OVSBridge, DatapathType: cfg.OVSDatapathType}); err != nil {
		db.Close()
		return nil, err
	}
	if cfg.OVSDatapathType == config.DatapathNetdev {
		if err := db.EnsureZoneTimeouts(ctx, userspaceZoneTimeouts()); err != nil {
			db.Close()
			return nil, err
		}
	}
	klog.InfoS("Bridge ready", "bridge", cfg.OVSBridge, "datapathType", cfg.OVSDatapathType)
	of, nativeOF := newFlowBridge(cfg)
	opts, err := proxyOptions(ctx, cfg, db)
	if err != nil {
		db.Close()
		return nil, err
	}
	if opts.Round, err = SaveNextRound(ctx, ovsdb.RoundStore{Client: db, Bridge: cfg.OVSBridge}); err != nil {
		db.Close()
		return nil, err
	}
	// One reconciler per bridge: the gateway, the CNI server and the proxier install their
	// flows and groups through it, and it verifies and replays them (the healer's owner).
	bridgeState, err := reconciler.New(reconciler.Options{Bridge: of, Round: opts.Round,
		Writers: []reconciler.Writer{GatewayWriter(), server.PodWriter()}})
	if err != nil {
		db.Close()
		return nil, err
	}
	dp, err := setupDataPath(ctx, cfg, db, of, &opts)
	if err != nil {
		db.Close()
		return nil, err
	}
	if dp != nil {
		dp.useReconciler(bridgeState)
	}
	if cfg.AntreaProxy.Enabled() {
		opts.Reconciler = bridgeState // disabled, the proxier never syncs: not a writer
	}
	opts.Events = events
	limits := setupRateLimits(ctx, cfg, db, of, &opts)
	obs := newObservers(cfg, opts.FullSyncPeriod)
	obs.metrics.Registry().MustRegister(newRateLimitCollector(metrics.Namespace, of, opts.RejectMeters, opts.Round,
		cfg.AntreaProxy.RateLimits.WithDefaults()))
	extra := []observe.Observer{newStartupRelease()}
	if dp != nil {
		extra = append(extra, dp)
	}
	opts.Observer = obs.list(extra...)
	p, err := proxy.New(opts, of)
	if err != nil {
		db.Close()
		return nil, err
	}
	return &Components{OVSDB: db, Bridge: of, nativeOF: nativeOF, Proxier: p, DataPath: dp, observers: obs, rejectLimits: limits,
		bridgeState: bridgeState}, nil
}

// flowBridge is what the agent's components need of the OpenFlow backend: Apply and dumps
// (the proxier, the gateway, the CNI server), counts (the healer), meters and statistics (the
// rate limits). Both backends implement it.
type flowBridge interface {
	openflow.Bridge
	openflow.FlowCounter
	rateLimitBridge
}

// newFlowBridge builds the configured OpenFlow backend. The native one delegates dumps and
// counts to ovs-ofctl; it is returned as well, for its connection monitoring.
func newFlowBridge(cfg *config.AgentConfig) (flowBridge, *native.Bridge) {
	ofc := ofctl.New(mgmtSocket(cfg))
	klog.InfoS("OpenFlow backend", "backend", cfg.OVSOpenFlowBackend, "target", ofc.Target())
	if cfg.OVSOpenFlowBackend == config.OpenFlowBackendOfctl {
		return ofc, nil
	}
	nb := native.New(mgmtSocket(cfg), ofc)
	return nb, nb
}

// SaveNextRound computes this run's flow round and saves it, retrying until OVSDB answers,
// before anything is installed: a failed save can never make a later run reuse the round.
func SaveNextRound(ctx context.Context, rounds RoundStore) (uint16, error) {
	round, err := nextRound(ctx, rounds)
	if err != nil {
		return 0, err
	}
	for delay := 100 * time.Millisecond; ; delay = min(2*delay, 5*time.Second) {
		err := rounds.SaveRound(ctx, round)
		if err == nil {
			klog.InfoS("Flow round saved", "round", round)
			return round, nil
		}
		klog.ErrorS(err, "Saving the flow round failed; retrying", "round", round, "retryIn", delay)
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("saving flow round %d: %w", round, ctx.Err())
		case <-time.After(delay):
		}
	}
}

func proxyOptions(ctx context.Context, cfg *config.AgentConfig, db *ovsdb.Client) (proxy.Options, error) {
	ap := cfg.AntreaProxy
	parsed, err := ap.SkipServiceSet()
	if err != nil {
		return proxy.Options{}, err
	}
	skip := skipSet(parsed)
	prefixes, err := ap.NodePortPrefixes()
	if err != nil {
		return proxy.Options{}, err
	}
	opts := proxy.Options{
		NodeName:             cfg.NodeName,
		ProxyLoadBalancerIPs: ap.ProxyLoadBalancerIPsEnabled(),
		ServiceProxyName:     ap.ServiceProxyName,
		Skip:                 skip,
		NodePortAddresses:    prefixes,
		MinSyncInterval:      ap.MinSyncInterval.Duration,
		FullSyncPeriod:       ap.FullSyncPeriod.Duration,
		ExternalIPCIDRs:      ap.ExternalIPPrefixes(),
		// ovs-vswitchd's connection tracker, for the UDP conntrack reconciler.
		Conntrack:          &conntrack.Table{RunDir: cfg.OVSRunDir},
		MaxFlowsPerService: ap.MaxFlowsPerService,
		MaxFlows:           ap.MaxFlows,
	}
	// No ExternalIP or LB IP may be one of the agent's virtual addresses (either family).
	opts.NodePortVirtualIPs, opts.ServiceVirtualIPs = cfg.NodeNetwork.VirtualIPs()
	// The host gateway is optional: without it, external connections are not SNATed.
	if port, err := db.GetOFPort(ctx, cfg.HostGateway); err == nil {
		opts.GatewayOFPort = uint32(port)
		opts.GatewayIPv4, opts.GatewayIPv6 = interfaceAddrs(cfg.HostGateway)
	} else {
		klog.InfoS("No host gateway port; external Service traffic will not be SNATed", "gateway", cfg.HostGateway, "reason", err)
	}
	return opts, nil
}

// interfaceAddrs returns the first global IPv4 and IPv6 address of a host interface.
func interfaceAddrs(name string) (v4, v6 netip.Addr) {
	iface, err := net.InterfaceByName(name)
	if err != nil {
		return
	}
	addrs, err := iface.Addrs()
	if err != nil {
		return
	}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(ipn.IP)
		if !ok || !ip.IsGlobalUnicast() {
			continue
		}
		ip = ip.Unmap()
		if ip.Is4() && !v4.IsValid() {
			v4 = ip
		} else if ip.Is6() && !v6.IsValid() {
			v6 = ip
		}
	}
	return
}

// Run sets the agent up and runs the proxier until ctx is done.
func Run(ctx context.Context, cfg *config.AgentConfig, client kubernetes.Interface) error {
	var events proxy.EventSink
	if client != nil {
		events = NewServiceEvents(ctx, client, cfg.NodeName)
	}
	c, err := Setup(ctx, cfg, events)
	if err != nil {
		return err
	}
	defer c.OVSDB.Close()
	apiOpts := apiserver.Options{Config: cfg, OVS: c.OVSDB, Livez: c.observers.health.LivezHandler()}
	var tracer *traceSource
	if cfg.AntreaProxy.Enabled() {
		apiOpts.Services = c.Proxier
		if tracer = newTraceSource(c.Proxier, c.DataPath); tracer != nil {
			apiOpts.Trace = tracer
		}
	}
	api, err := apiserver.Start(ctx, apiOpts)
	if err != nil {
		return fmt.Errorf("starting the agent API: %w", err)
	}
	defer api.Close()
	// One informer factory for the binary: the data path, the announcer and the proxier share
	// its Node, Service and EndpointSlice informers, whose caches keep only what the agent reads.
	factory := newInformerFactory(client)
	defer factory.Shutdown()
	// Shutdown waits for the informers, which stop with ctx: cancel it first (defers run in
	// reverse), or an error return (the data path failed to start) would block here for ever,
	// with the error unreported and the process alive.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.setUpAnnouncerLease(cfg, client)
	c.wireCNIReporting(ctx, cfg, client)
	if err := startDataPath(ctx, c, factory); err != nil {
		return fmt.Errorf("starting the node data path: %w", err)
	}
	tracer.dataPathStarted()
	// The data path's goroutines finish their shutdown work (the announcer hands its addresses
	// over) before the process exits.
	defer c.waitDataPath(cancel)
	c.startSelfHealing(ctx, cfg)
	go c.clearFlowRestoreWaitAtStart(ctx, cfg)
	if !cfg.AntreaProxy.Enabled() {
		klog.InfoS("AntreaProxy is disabled (antreaProxy.enable=false); nothing to do")
		<-ctx.Done()
		return nil
	}
	c.observers.start(ctx, cfg)
	if _, err := WatchServiceCIDRs(ctx, client, factory, c.Proxier); err != nil {
		return err
	}
	return c.Proxier.RunWithInformers(ctx, factory)
}
