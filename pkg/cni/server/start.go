package server

import (
	"context"
	"errors"
	"fmt"
	"os"

	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/cni/ipam"
	"github.com/antrea-proxy/antrea-proxy/pkg/cni/protocol"
)

// Start brings the node's pods in line with the state on disk before any request is served:
//
//  1. the DELs spooled by the plugin while the agent was down are carried out;
//  2. pods whose network namespace is gone are removed (their DEL was lost or never came);
//  3. the other pods get their OVS port back if it is missing, and their flows reinstalled in
//     this round;
//  4. pod flows that belong to no restored pod (older rounds, orphans) are removed, in one
//     bundle that re-adds the restored pods' flows (no dump: foreign flows cannot make it
//     fail), and addresses that belong to no pod are released.
//
// Start then marks the server ready. A failure leaves the server not ready; Start may be
// called again.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.replaySpool(ctx); err != nil {
		return err
	}
	recs, bad, err := s.store.list()
	if err != nil {
		return err
	}
	for _, p := range bad {
		klog.ErrorS(nil, "Removing unreadable pod record", "file", p)
		_ = os.Remove(p)
	}
	var errs []error
	live := 0
	for _, rec := range recs {
		if !s.net.NetNSExists(rec.NetNS) {
			klog.InfoS("Removing pod whose network namespace is gone", "container", rec.ContainerID, "ifName", rec.IfName, "netns", rec.NetNS)
			if err := s.teardown(ctx, rec); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if err := s.attach(ctx, rec); err != nil {
			errs = append(errs, fmt.Errorf("restoring container %s interface %s: %w", rec.ContainerID, rec.IfName, err))
			continue
		}
		live++
	}
	// One bundle replaces every pod flow (orphans and older rounds included) by the flows of
	// the pods just restored: nothing is dumped, so no flow on the bridge can make this fail.
	if err := s.replayLocked(ctx); err != nil {
		errs = append(errs, fmt.Errorf("removing pod flows of older rounds: %w", err))
	}
	if err := s.releaseOrphanAddresses(map[ipam.Owner]bool{}); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("starting CNI server: %w", err)
	}
	s.ready.Store(true)
	klog.InfoS("CNI server started", "pods", live, "round", s.opts.Round)
	return nil
}

// Reconcile carries out DELs spooled since start-up (the plugin spools when it cannot reach the
// agent, e.g. during a brief socket outage) and removes pods whose network namespace has
// vanished. The agent may call it periodically once the server is ready.
func (s *Server) Reconcile(ctx context.Context) error {
	if !s.Ready() {
		return errors.New("CNI server not started")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.replaySpool(ctx); err != nil {
		return err
	}
	recs, _, err := s.store.list()
	if err != nil {
		return err
	}
	var errs []error
	for _, rec := range recs {
		if s.net.NetNSExists(rec.NetNS) {
			continue
		}
		klog.InfoS("Removing pod whose network namespace is gone", "container", rec.ContainerID, "ifName", rec.IfName, "netns", rec.NetNS)
		if err := s.teardown(ctx, rec); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// replaySpool carries out the DELs the plugin spooled and removes them.
func (s *Server) replaySpool(ctx context.Context) error {
	if s.opts.SpoolDir == "" {
		return nil
	}
	reqs, bad, err := protocol.ReadSpool(s.opts.SpoolDir)
	if err != nil {
		return err
	}
	for _, p := range bad {
		klog.ErrorS(nil, "Removing unreadable spooled CNI request", "file", p)
		_ = os.Remove(p)
	}
	for _, r := range reqs {
		resp := s.del(ctx, r.Request)
		if resp.Error != nil {
			return fmt.Errorf("spooled DEL of container %s interface %s: %w", r.Request.ContainerID, r.Request.IfName, resp.Error)
		}
		klog.InfoS("Carried out spooled DEL", "container", r.Request.ContainerID, "ifName", r.Request.IfName)
		if err := os.Remove(r.File); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing spooled DEL %s: %w", r.File, err)
		}
	}
	return nil
}
