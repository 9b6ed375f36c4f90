package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"strings"

	cnitypes "github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/cni/ipam"
	"github.com/antrea-proxy/antrea-proxy/pkg/cni/podnet"
	"github.com/antrea-proxy/antrea-proxy/pkg/cni/protocol"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/ovsdb"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// External IDs of a pod's OVS port and interface.
const (
	ExtIDContainerID = "container-id"
	ExtIDIfName      = "container-ifname"
	ExtIDPodNS       = "pod-namespace"
	ExtIDPodName     = "pod-name"
	ExtIDIP          = "ip-address"
	ExtIDMAC         = "mac-address"
	ExtIDOwner       = "antrea-owner"
	ownerCNI         = "antrea-cni"
)

func (s *Server) add(ctx context.Context, req protocol.Request) protocol.Response {
	args, _ := protocol.ParseArgs(req.Args) // validated
	o := ipam.Owner{ContainerID: req.ContainerID, IfName: req.IfName}
	if !s.net.NetNSExists(req.Netns) {
		return protocol.Response{Error: protocol.Errorf(protocol.ErrInvalidEnvironmentVariables, "CNI_NETNS %s is not a network namespace", req.Netns)}
	}
	rec, existed, err := s.store.get(o)
	if err != nil {
		return internal("reading pod state", err)
	}
	if existed && rec.NetNS != req.Netns {
		// The same attachment in another namespace: the old one is stale.
		klog.InfoS("Replacing pod interface attached to another network namespace", "container", o.ContainerID,
			"ifName", o.IfName, "oldNetNS", rec.NetNS, "netns", req.Netns)
		if err := s.teardown(ctx, rec); err != nil {
			return internal("removing the stale pod interface", err)
		}
		existed = false
	}
	ips, err := s.ipam.Allocate(o)
	if err != nil {
		return internal("allocating pod addresses", err)
	}
	if !existed {
		rec = &podRecord{ContainerID: o.ContainerID, IfName: o.IfName, HostIfName: hostIfName(o.ContainerID, o.IfName)}
	}
	rec.NetNS = req.Netns
	rec.PodNamespace, rec.PodName = args[protocol.ArgPodNamespace], args[protocol.ArgPodName]
	rec.IPs = ips
	// The record goes to disk before anything is created, so that a crash midway leaves
	// something for the reconciliation to clean up.
	if err := s.store.put(rec); err != nil {
		_ = s.ipam.Release(o)
		return internal("saving pod state", err)
	}
	if err := s.attach(ctx, rec); err != nil {
		if !existed {
			if terr := s.teardown(ctx, rec); terr != nil {
				klog.ErrorS(terr, "Rolling back a failed ADD", "container", o.ContainerID, "ifName", o.IfName)
			}
		}
		return internal(fmt.Sprintf("attaching container %s interface %s", o.ContainerID, o.IfName), err)
	}
	res, err := s.result(rec)
	if err != nil {
		return internal("encoding result", err)
	}
	klog.InfoS("Pod interface added", "container", o.ContainerID, "ifName", o.IfName, "pod", rec.PodNamespace+"/"+rec.PodName,
		"ips", rec.IPs, "hostIf", rec.HostIfName, "ofport", rec.OFPort)
	return protocol.Response{Result: res}
}

// attach brings the pod interface, its OVS port and its flows in line with rec, and saves the
// record with what it learned (MACs, OpenFlow port). Every step is idempotent.
func (s *Server) attach(ctx context.Context, rec *podRecord) error {
	ifs, err := s.net.Setup(s.podnetConfig(rec))
	if err != nil {
		return err
	}
	rec.PodMAC, rec.HostMAC = ifs.PodMAC.String(), ifs.HostMAC.String()
	ofport, err := s.ports.EnsurePort(ctx, s.opts.Bridge, ovsdb.PortConfig{Name: rec.HostIfName, ExternalIDs: s.externalIDs(rec)})
	if err != nil {
		return err
	}
	oldPort := rec.OFPort
	rec.OFPort = uint32(ofport)
	if err := s.installFlows(ctx, rec, oldPort); err != nil {
		return err
	}
	return s.store.put(rec)
}

func (s *Server) podnetConfig(rec *podRecord) podnet.Config {
	return podnet.Config{
		NetNS: rec.NetNS, IfName: rec.IfName, HostIfName: rec.HostIfName, MTU: s.opts.MTU,
		Addresses: rec.IPs, Gateways: s.gatewaysFor(rec.IPs), DisableTXChecksumOffload: s.opts.DisableTXChecksumOffload,
	}
}

// gatewaysFor returns the gateway of each address's podCIDR.
func (s *Server) gatewaysFor(ips []netip.Prefix) []netip.Addr {
	var out []netip.Addr
	for _, ip := range ips {
		for i, c := range s.ipam.Subnets() {
			if c.Contains(ip.Addr()) {
				out = append(out, s.gateways[i])
			}
		}
	}
	return out
}

func (s *Server) externalIDs(rec *podRecord) map[string]string {
	var ips []string
	for _, p := range rec.IPs {
		ips = append(ips, p.Addr().String())
	}
	ids := map[string]string{
		ExtIDContainerID: rec.ContainerID, ExtIDIfName: rec.IfName, ExtIDIP: strings.Join(ips, ","),
		ExtIDMAC: rec.PodMAC, ExtIDOwner: ownerCNI,
	}
	if rec.PodNamespace != "" {
		ids[ExtIDPodNS] = rec.PodNamespace
	}
	if rec.PodName != "" {
		ids[ExtIDPodName] = rec.PodName
	}
	return ids
}

// podFlows returns the flows rec's pod needs in this round.
func (s *Server) podFlows(rec *podRecord) ([]openflow.Flow, error) {
	mac, err := net.ParseMAC(rec.PodMAC)
	if err != nil {
		return nil, fmt.Errorf("pod MAC %q of container %s: %w", rec.PodMAC, rec.ContainerID, err)
	}
	p := pipeline.Pod{ID: uint64(rec.OFPort), OFPort: rec.OFPort, MAC: mac}
	for _, ip := range rec.IPs {
		p.IPs = append(p.IPs, ip.Addr())
	}
	return pipeline.PodFlows(s.opts.Round, s.opts.GatewayMAC, p), nil
}

// installFlows replaces, in one bundle, the pod's flows (those of any round, and those of its
// previous OpenFlow port when it changed) with this round's.
func (s *Server) installFlows(ctx context.Context, rec *podRecord, oldPort uint32) error {
	flows, err := s.podFlows(rec)
	if err != nil {
		return err
	}
	if err := s.setPodFlows(ctx, rec.OFPort, oldPort, flows); err != nil {
		return fmt.Errorf("installing flows of container %s on port %d: %w", rec.ContainerID, rec.OFPort, err)
	}
	return nil
}

// result is the CNI 1.0.0 result of an ADD.
func (s *Server) result(rec *podRecord) (json.RawMessage, error) {
	hostMAC, podMAC := rec.HostMAC, rec.PodMAC
	res := &types100.Result{
		CNIVersion: "1.0.0",
		Interfaces: []*types100.Interface{
			{Name: rec.HostIfName, Mac: hostMAC},
			{Name: rec.IfName, Mac: podMAC, Sandbox: rec.NetNS},
		},
	}
	gws := s.gatewaysFor(rec.IPs)
	for i, ip := range rec.IPs {
		ipn := net.IPNet{IP: ip.Addr().AsSlice(), Mask: net.CIDRMask(ip.Bits(), ip.Addr().BitLen())}
		gw := net.IP(gws[i].AsSlice())
		res.IPs = append(res.IPs, &types100.IPConfig{Interface: types100.Int(1), Address: ipn, Gateway: gw})
		zero := net.IPv4zero.To4()
		if ip.Addr().Is6() {
			zero = net.IPv6zero
		}
		res.Routes = append(res.Routes, &cnitypes.Route{Dst: net.IPNet{IP: zero, Mask: net.CIDRMask(0, ip.Addr().BitLen())}, GW: gw})
	}
	return json.Marshal(res)
}
