// Package server is the CNI server of antrea-agent. It answers the antrea-cni plugin's requests
// (pkg/cni/protocol) on a unix socket: ADD creates the pod's veth pair and addresses
// (pkg/cni/podnet), reserves the addresses in the Node's podCIDRs (pkg/cni/ipam), attaches the
// host end to the OVS bridge and installs the pod's flows (pkg/pipeline.PodFlows); DEL undoes
// all of it; CHECK verifies it; STATUS says whether the server is ready; GC removes attachments
// the runtime no longer knows.
//
// The server keeps a record per pod interface on disk. At start-up it replays the DELs the
// plugin spooled while the agent was down, removes pods whose network namespace is gone, and
// reinstalls the flows of the others with the agent's new round. State files it cannot use
// (unreadable, undecodable or inconsistent pod records, spooled DELs and address
// reservations) are moved into StateDir/quarantine, and a pod it cannot restore is retried by
// Reconcile: one pod never keeps the others from being served. On a full disk, pod records
// and address reservations are kept in memory and written by Reconcile later.
package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/cni/ipam"
	"github.com/antrea-proxy/antrea-proxy/pkg/cni/podnet"
	"github.com/antrea-proxy/antrea-proxy/pkg/cni/protocol"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/ovsdb"
	"github.com/antrea-proxy/antrea-proxy/pkg/reconciler"
)

// OVSPorts attaches and detaches pod ports on the bridge (implemented by *ovsdb.Client).
type OVSPorts interface {
	EnsurePort(ctx context.Context, bridge string, cfg ovsdb.PortConfig) (int32, error)
	DeletePort(ctx context.Context, bridge, name string) error
	GetOFPort(ctx context.Context, name string) (int32, error)
}

// Netlink sets up pod interfaces (implemented by *podnet.Netlink).
type Netlink interface {
	Setup(cfg podnet.Config) (podnet.Interfaces, error)
	Check(cfg podnet.Config) error
	Teardown(cfg podnet.Config) error
	NetNSExists(path string) bool
}

// Options configure the server.
type Options struct {
	// Bridge is the OVS bridge pods are attached to.
	Bridge string
	// PodCIDRs are the Node's podCIDRs, at most one per family. Each one's first address is the
	// pods' gateway.
	PodCIDRs []netip.Prefix
	// GatewayMAC is the MAC of the host gateway; L3 forwarding to pods rewrites the source MAC
	// to it. Nil leaves the source MAC alone (no gateway yet).
	GatewayMAC net.HardwareAddr
	// MTU of pod interfaces; 0 keeps the kernel default.
	MTU int
	// StateDir keeps IPAM reservations (StateDir/ipam) and pod records (StateDir/pods).
	StateDir string
	// SpoolDir is where the plugin spools DELs while the agent is down.
	SpoolDir string
	// Round is the agent run's flow round (see pipeline.Cookie).
	Round uint16
	// DisableTXChecksumOffload is needed with OVS's userspace datapath.
	DisableTXChecksumOffload bool
	// QuarantineKeep is how many unusable state files StateDir/quarantine keeps (the newest);
	// 0 means DefaultQuarantineKeep.
	QuarantineKeep int
	// Reporter, if set, is told about quarantined files and state kept in memory only.
	Reporter Reporter
	// Reconciler is the bridge's reconciler (one per bridge, shared with its other writers),
	// with PodWriter() among its writers and this Round; nil means one of the server's own over
	// the bridge given to New.
	Reconciler *reconciler.Reconciler
}

// requestTimeout bounds the work of one request.
const requestTimeout = 2 * time.Minute

// Server is the CNI server. Create it with New, call Start once, then Serve.
type Server struct {
	opts   Options
	ports  OVSPorts
	bridge openflow.Bridge
	net    Netlink
	ipam   *ipam.Allocator
	store  *store
	// gateways are the pods' gateways, in PodCIDRs order.
	gateways []netip.Addr

	quarantine *quarantine
	stats      *stats
	// stuck are unusable files that could be neither moved nor removed, already reported
	// (guarded by mu).
	stuck map[string]bool

	// rec installs, verifies and replays the pod flows (Options.Reconciler).
	rec *reconciler.Reconciler
	// mu serializes every change to pods, and every change of pod flows.
	mu sync.Mutex
	// unrestored are pods whose restore failed at Start; Reconcile retries them (guarded by mu).
	unrestored map[ipam.Owner]bool
	// unsavedReported is set while state is kept in memory only and that was reported
	// (guarded by mu).
	unsavedReported bool
	ready           atomic.Bool
}

// New checks opts and opens the on-disk state.
func New(opts Options, ports OVSPorts, bridge openflow.Bridge, nl Netlink) (*Server, error) {
	if opts.Bridge == "" {
		return nil, errors.New("CNI server: no bridge")
	}
	if opts.StateDir == "" {
		return nil, errors.New("CNI server: no state directory")
	}
	alloc, err := ipam.New(filepath.Join(opts.StateDir, "ipam"), opts.PodCIDRs)
	if err != nil {
		return nil, fmt.Errorf("CNI server: %w", err)
	}
	if opts.QuarantineKeep < 0 {
		return nil, fmt.Errorf("CNI server: negative quarantineKeep %d", opts.QuarantineKeep)
	}
	if opts.QuarantineKeep == 0 {
		opts.QuarantineKeep = DefaultQuarantineKeep
	}
	rec := opts.Reconciler
	if rec == nil {
		if rec, err = newReconciler(bridge, opts.Round); err != nil {
			return nil, fmt.Errorf("CNI server: %w", err)
		}
	}
	if rec.Round() != opts.Round {
		return nil, fmt.Errorf("CNI server: the reconciler's round %d is not round %d", rec.Round(), opts.Round)
	}
	s := &Server{opts: opts, ports: ports, bridge: bridge, rec: rec, net: nl, ipam: alloc, stats: newStats(),
		quarantine: &quarantine{dir: filepath.Join(opts.StateDir, "quarantine"), keep: opts.QuarantineKeep},
		unrestored: map[ipam.Owner]bool{}, stuck: map[string]bool{}}
	st, err := newStore(filepath.Join(opts.StateDir, "pods"), s.stats, func(path string, reason error) {
		s.quarantineFile(KindPodRecord, path, reason)
	})
	if err != nil {
		return nil, fmt.Errorf("CNI server: %w", err)
	}
	s.store = st
	for _, p := range alloc.Subnets() {
		s.gateways = append(s.gateways, ipam.Gateway(p))
	}
	return s, nil
}

// Ready reports whether Start has completed.
func (s *Server) Ready() bool { return s.ready.Load() }

// Serve answers CNI requests on the unix socket at path until ctx is done.
func (s *Server) Serve(ctx context.Context, path string) error {
	l, err := protocol.Listen(path)
	if err != nil {
		return err
	}
	klog.InfoS("CNI server listening", "socket", path)
	return protocol.Serve(ctx, l, s)
}

// Handle answers one CNI request.
func (s *Server) Handle(ctx context.Context, req protocol.Request) protocol.Response {
	conf, cerr := protocol.ParseNetConf(req.Config)
	if cerr != nil {
		return protocol.Response{Error: cerr}
	}
	if cerr := validate(req); cerr != nil {
		return protocol.Response{Error: cerr}
	}
	if req.Command == protocol.CmdStatus {
		if !s.Ready() {
			return protocol.Response{Error: protocol.NewError(protocol.ErrPluginNotAvailable, "antrea-agent CNI server is starting", "")}
		}
		return protocol.Response{}
	}
	if !s.Ready() {
		return protocol.Response{Error: protocol.NewError(protocol.ErrTryAgainLater, "antrea-agent CNI server is starting, try again later", "")}
	}
	// A plugin that gives up must not leave a half-made attachment: the work runs to its end
	// (bounded) even when the caller goes away.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), requestTimeout)
	defer cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	var resp protocol.Response
	switch req.Command {
	case protocol.CmdAdd:
		resp = s.add(ctx, req)
		s.noteUnsaved()
	case protocol.CmdDel:
		resp = s.del(ctx, req)
	case protocol.CmdCheck:
		resp = s.check(ctx, req, conf)
	case protocol.CmdGC:
		resp = s.gc(ctx, conf)
	}
	if resp.Error != nil {
		klog.ErrorS(resp.Error, "CNI request failed", "command", req.Command, "container", req.ContainerID, "ifName", req.IfName, "code", resp.Error.Code)
	} else {
		klog.V(2).InfoS("CNI request done", "command", req.Command, "container", req.ContainerID, "ifName", req.IfName)
	}
	return resp
}

// validate checks a request that did not necessarily come from the plugin.
func validate(req protocol.Request) *protocol.Error {
	need := map[string][]string{
		protocol.CmdAdd:    {"CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME"},
		protocol.CmdCheck:  {"CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME"},
		protocol.CmdDel:    {"CNI_CONTAINERID", "CNI_IFNAME"},
		protocol.CmdGC:     nil,
		protocol.CmdStatus: nil,
	}
	vars, ok := need[req.Command]
	if !ok {
		return protocol.Errorf(protocol.ErrInvalidEnvironmentVariables, "unknown CNI_COMMAND %q", req.Command)
	}
	values := map[string]string{"CNI_CONTAINERID": req.ContainerID, "CNI_NETNS": req.Netns, "CNI_IFNAME": req.IfName}
	for _, v := range vars {
		if values[v] == "" {
			return protocol.Errorf(protocol.ErrInvalidEnvironmentVariables, "required env variable %s missing", v)
		}
	}
	if _, err := protocol.ParseArgs(req.Args); err != nil {
		return protocol.NewError(protocol.ErrInvalidEnvironmentVariables, "invalid CNI_ARGS", err.Error())
	}
	return nil
}

// internal wraps an unexpected failure as a CNI error.
func internal(msg string, err error) protocol.Response {
	code := protocol.ErrInternal
	switch {
	case errors.Is(err, ipam.ErrExhausted):
		code = protocol.ErrNoFreeAddress
	case errors.Is(err, podnet.ErrNetNSNotFound):
		code = protocol.ErrInvalidEnvironmentVariables
	}
	return protocol.Response{Error: protocol.NewError(code, msg, err.Error())}
}
