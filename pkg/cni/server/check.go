package server

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/antrea-proxy/antrea-proxy/pkg/cni/ipam"
	"github.com/antrea-proxy/antrea-proxy/pkg/cni/protocol"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// check verifies that the attachment is what ADD made of it: the addresses are still reserved
// for it, the interfaces, addresses and routes exist, the OVS port has the recorded OpenFlow
// port, this round's flows are installed, and the previous result (if given) names the same
// addresses.
func (s *Server) check(ctx context.Context, req protocol.Request, conf *protocol.NetConf) protocol.Response {
	o := ipam.Owner{ContainerID: req.ContainerID, IfName: req.IfName}
	rec, found, err := s.store.get(o)
	if err != nil {
		return internal("reading pod state", err)
	}
	if !found {
		return protocol.Response{Error: protocol.Errorf(protocol.ErrUnknownContainer, "container %s has no interface %s", o.ContainerID, o.IfName)}
	}
	fail := func(format string, args ...any) protocol.Response {
		return protocol.Response{Error: protocol.NewError(protocol.ErrInternal,
			fmt.Sprintf("check of container %s interface %s failed", o.ContainerID, o.IfName), fmt.Sprintf(format, args...))}
	}
	if rec.NetNS != req.Netns {
		return fail("attached to network namespace %s, not %s", rec.NetNS, req.Netns)
	}
	held, err := s.ipam.Get(o)
	if err != nil {
		return internal("reading IPAM state", err)
	}
	if !slices.Equal(held, rec.IPs) {
		return fail("IPAM holds %v for it, the pod has %v", held, rec.IPs)
	}
	if len(conf.PrevResult) > 0 {
		if msg := comparePrevResult(conf, rec.IPs); msg != "" {
			return fail("%s", msg)
		}
	}
	if err := s.net.Check(s.podnetConfig(rec)); err != nil {
		return fail("%v", err)
	}
	port, err := s.ports.GetOFPort(ctx, rec.HostIfName)
	if err != nil {
		return fail("%v", err)
	}
	if uint32(port) != rec.OFPort {
		return fail("OVS port %s has OpenFlow port %d, flows are for %d", rec.HostIfName, port, rec.OFPort)
	}
	if msg, err := s.checkFlows(ctx, rec); err != nil {
		return internal("dumping pod flows", err)
	} else if msg != "" {
		return fail("%s", msg)
	}
	return protocol.Response{}
}

// comparePrevResult returns why prevResult disagrees with ips, or "".
func comparePrevResult(conf *protocol.NetConf, ips []netip.Prefix) string {
	prev, err := version.NewResult(conf.CNIVersion, conf.PrevResult)
	if err != nil {
		return fmt.Sprintf("decoding prevResult: %v", err)
	}
	r, err := types100.NewResultFromResult(prev)
	if err != nil {
		return fmt.Sprintf("converting prevResult: %v", err)
	}
	var got []netip.Prefix
	for _, c := range r.IPs {
		a, ok := netip.AddrFromSlice(c.Address.IP)
		ones, _ := c.Address.Mask.Size()
		if ok {
			got = append(got, netip.PrefixFrom(a.Unmap(), ones))
		}
	}
	if !slices.Equal(got, ips) {
		return fmt.Sprintf("prevResult has addresses %v, the pod has %v", got, ips)
	}
	return ""
}

// checkFlows returns what is wrong with the pod's installed flows, or "".
func (s *Server) checkFlows(ctx context.Context, rec *podRecord) (string, error) {
	want, err := s.podFlows(rec)
	if err != nil {
		return err.Error(), nil
	}
	have, err := s.bridge.DumpFlows(ctx, openflow.FlowFilter{
		Cookie: pipeline.PodCookie(s.opts.Round, uint64(rec.OFPort)), CookieMask: pipeline.RoundMask | pipeline.PodCookieMask})
	if err != nil {
		return "", err
	}
	installed := map[string]bool{}
	for i := range have {
		c := openflow.CanonicalFlow(have[i])
		installed[openflow.FormatFlow(&c)] = true
	}
	for i := range want {
		c := openflow.CanonicalFlow(want[i])
		if f := openflow.FormatFlow(&c); !installed[f] {
			return fmt.Sprintf("flow missing: %s", f), nil
		}
	}
	return "", nil
}
