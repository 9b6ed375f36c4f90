package agent

import (
	"context"
	"fmt"
	"time"

	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/cni/podnet"
	"github.com/antrea-proxy/antrea-proxy/pkg/cni/protocol"
	"github.com/antrea-proxy/antrea-proxy/pkg/cni/server"
	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/metrics"
)

// startCNI starts the CNI server with the Node's podCIDRs, the gateway MAC and this round:
// it restores the pods of an earlier run, then answers on the CNI socket until ctx is done.
func (d *DataPath) startCNI(ctx context.Context) error {
	nn := d.cfg.NodeNetwork
	bridgeState, err := d.reconciler()
	if err != nil {
		return err
	}
	srv, err := server.New(server.Options{
		Bridge:                   d.cfg.OVSBridge,
		PodCIDRs:                 d.podCIDRs,
		GatewayMAC:               d.gw.MAC,
		MTU:                      nn.MTU,
		StateDir:                 nn.CNIStatePath(),
		SpoolDir:                 nn.CNIDelSpoolPath(),
		Round:                    d.round,
		DisableTXChecksumOffload: d.cfg.OVSDatapathType == config.DatapathNetdev,
		Reporter:                 d.opts.CNI.Reporter,
		Reconciler:               bridgeState,
	}, d.opts.OVSDB, d.opts.Bridge, &podnet.Netlink{HostNetNS: d.opts.HostNetNS})
	if err != nil {
		return err
	}
	if r := d.opts.CNI.Metrics; r != nil {
		if err := r.Register(srv.Collector(metrics.Namespace)); err != nil {
			return fmt.Errorf("registering the CNI server's metrics: %w", err)
		}
	}
	if err := srv.Start(ctx); err != nil {
		return err
	}
	sock := nn.CNISocketPath()
	l, err := protocol.Listen(sock)
	if err != nil {
		return err
	}
	d.cni = srv
	klog.InfoS("CNI server listening", "socket", sock, "podCIDRs", d.podCIDRs, "round", d.round)
	d.goRun(func() error {
		if err := protocol.Serve(ctx, l, srv); err != nil {
			return fmt.Errorf("CNI server on %s: %w", sock, err)
		}
		return nil
	})
	d.goRun(func() error {
		// DELs the plugin spooled during a brief socket outage, and pods whose namespace vanished.
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(cniReconcilePeriod):
			}
			if err := srv.Reconcile(ctx); err != nil && ctx.Err() == nil {
				klog.ErrorS(err, "CNI reconciliation failed")
			}
		}
	})
	return nil
}

// cniReconcilePeriod is how often the CNI server replays spooled DELs.
const cniReconcilePeriod = 30 * time.Second

// CNIServer returns the CNI server once Start has returned.
func (d *DataPath) CNIServer() *server.Server { return d.cni }
