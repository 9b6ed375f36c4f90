package server

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/cni/ipam"
	"github.com/antrea-proxy/antrea-proxy/pkg/cni/protocol"
)

func (s *Server) del(ctx context.Context, req protocol.Request) protocol.Response {
	o := ipam.Owner{ContainerID: req.ContainerID, IfName: req.IfName}
	rec, found, err := s.store.get(o)
	if err != nil {
		return internal("reading pod state", err)
	}
	if !found {
		// Nothing recorded (already deleted, or a crash before the record was written): remove
		// whatever can be found from the container ID and interface alone.
		rec = &podRecord{ContainerID: o.ContainerID, IfName: o.IfName, NetNS: req.Netns, HostIfName: hostIfName(o.ContainerID, o.IfName)}
		if port, err := s.ports.GetOFPort(ctx, rec.HostIfName); err == nil && port > 0 {
			rec.OFPort = uint32(port)
		}
	}
	if req.Netns != "" && rec.NetNS == "" {
		rec.NetNS = req.Netns
	}
	if err := s.teardown(ctx, rec); err != nil {
		return internal(fmt.Sprintf("deleting container %s interface %s", o.ContainerID, o.IfName), err)
	}
	if found {
		klog.InfoS("Pod interface deleted", "container", o.ContainerID, "ifName", o.IfName, "pod", rec.PodNamespace+"/"+rec.PodName, "ips", rec.IPs)
	}
	return protocol.Response{}
}

// teardown removes everything of rec: flows, OVS port, veth pair, addresses and record. Each
// step tolerates what is already gone, so it can be repeated after a partial failure.
func (s *Server) teardown(ctx context.Context, rec *podRecord) error {
	if rec.OFPort != 0 {
		if err := s.setPodFlows(ctx, rec.OFPort, 0, nil); err != nil {
			return fmt.Errorf("deleting flows of port %d: %w", rec.OFPort, err)
		}
	}
	if err := s.ports.DeletePort(ctx, s.opts.Bridge, rec.HostIfName); err != nil {
		return err
	}
	if err := s.net.Teardown(s.podnetConfig(rec)); err != nil {
		return err
	}
	if err := s.ipam.Release(rec.owner()); err != nil {
		return err
	}
	return s.store.delete(rec.owner())
}

func (s *Server) gc(ctx context.Context, conf *protocol.NetConf) protocol.Response {
	valid := map[ipam.Owner]bool{}
	for _, a := range conf.ValidAttachments {
		valid[ipam.Owner{ContainerID: a.ContainerID, IfName: a.IfName}] = true
	}
	recs, err := s.store.list()
	if err != nil {
		return internal("listing pods", err)
	}
	var errs []error
	for _, rec := range recs {
		if valid[rec.owner()] {
			continue
		}
		klog.InfoS("Garbage-collecting pod interface", "container", rec.ContainerID, "ifName", rec.IfName)
		if err := s.teardown(ctx, rec); err != nil {
			errs = append(errs, err)
		}
	}
	if err := s.releaseOrphanAddresses(valid); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return internal("garbage collection", err)
	}
	return protocol.Response{}
}

// releaseOrphanAddresses frees reservations that have no pod record and are not in keep.
func (s *Server) releaseOrphanAddresses(keep map[ipam.Owner]bool) error {
	owners, err := s.ipam.Owners()
	if err != nil {
		return err
	}
	for o, ips := range owners {
		if keep[o] {
			continue
		}
		if _, found, err := s.store.get(o); err != nil || found {
			continue
		}
		klog.InfoS("Releasing addresses without a pod", "owner", o, "ips", ips)
		if err := s.ipam.Release(o); err != nil {
			return err
		}
	}
	return nil
}
