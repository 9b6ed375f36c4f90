package server

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
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
// No single pod can make Start fail: a file that is not a valid pod record, spooled DEL or
// address reservation is moved into StateDir/quarantine (logged, counted, reported), and a pod
// or spooled DEL that cannot be restored or carried out is logged, counted and retried by
// Reconcile. Start fails only when the pod state directory cannot be read or the bundle of
// step 4 fails (OVS is unusable); the server then stays not ready and Start may be called
// again.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replaySpool(ctx)
	recs, err := s.store.list()
	if err != nil {
		return fmt.Errorf("starting CNI server: %w", err)
	}
	live := map[netip.Addr]ipam.Owner{}
	restored := 0
	for _, rec := range recs {
		if !s.net.NetNSExists(rec.NetNS) {
			klog.InfoS("Removing pod whose network namespace is gone", "container", rec.ContainerID, "ifName", rec.IfName, "netns", rec.NetNS)
			if err := s.teardown(ctx, rec); err != nil {
				s.restoreFailed(rec, "removing", err)
			}
			continue
		}
		for _, ip := range rec.IPs {
			live[ip.Addr()] = rec.owner()
		}
		if err := s.attach(ctx, rec); err != nil {
			s.restoreFailed(rec, "restoring", err)
			s.unrestored[rec.owner()] = true
			continue
		}
		restored++
	}
	// One bundle replaces every pod flow (orphans and older rounds included) by the flows of
	// the pods just restored: nothing is dumped, so no flow on the bridge can make this fail.
	if err := s.replaceAllPodFlows(ctx); err != nil {
		return fmt.Errorf("starting CNI server: removing pod flows of older rounds: %w", err)
	}
	s.checkAddresses(live)
	if err := s.releaseOrphanAddresses(map[ipam.Owner]bool{}); err != nil {
		klog.ErrorS(err, "Releasing addresses without a pod failed; retried at the next GC")
	}
	s.noteUnsaved()
	s.ready.Store(true)
	klog.InfoS("CNI server started", "pods", restored, "unrestored", len(s.unrestored), "round", s.opts.Round)
	return nil
}

func (s *Server) restoreFailed(rec *podRecord, what string, err error) {
	klog.ErrorS(err, "Cannot restore a pod at start-up; the other pods are served and it is retried later", "step", what,
		"container", rec.ContainerID, "ifName", rec.IfName, "pod", rec.PodNamespace+"/"+rec.PodName)
	s.stats.restoreFailed()
}

// checkAddresses deals with address reservations that cannot be read: one whose address a
// live pod's record holds is rewritten for that pod; the others are quarantined, which frees
// the address.
func (s *Server) checkAddresses(live map[netip.Addr]ipam.Owner) {
	corrupt, err := s.ipam.Corrupt()
	if err != nil {
		klog.ErrorS(err, "Cannot check the address reservations")
		return
	}
	for _, ip := range corrupt {
		if o, ok := live[ip]; ok {
			if err := s.ipam.Repair(ip, o); err != nil {
				klog.ErrorS(err, "Cannot rewrite an unreadable address reservation", "ip", ip, "owner", o)
			} else {
				klog.InfoS("Rewrote an unreadable address reservation for the pod that holds the address", "ip", ip, "owner", o)
			}
			continue
		}
		s.quarantineFile(KindIPAM, s.ipam.File(ip), fmt.Errorf("address reservation of %s cannot be read or decoded and no pod holds the address", ip))
	}
}

// Reconcile carries out DELs spooled since start-up (the plugin spools when it cannot reach the
// agent, e.g. during a brief socket outage), removes pods whose network namespace has
// vanished, retries the pods Start could not restore and writes the state kept in memory while
// the disk was full. The agent may call it periodically once the server is ready.
func (s *Server) Reconcile(ctx context.Context) error {
	if !s.Ready() {
		return errors.New("CNI server not started")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replaySpool(ctx)
	var errs []error
	if err := s.flushState(); err != nil {
		errs = append(errs, err)
	}
	recs, err := s.store.list()
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, rec := range recs {
		if !s.net.NetNSExists(rec.NetNS) {
			klog.InfoS("Removing pod whose network namespace is gone", "container", rec.ContainerID, "ifName", rec.IfName, "netns", rec.NetNS)
			if err := s.teardown(ctx, rec); err != nil {
				errs = append(errs, err)
			}
			delete(s.unrestored, rec.owner())
			continue
		}
		if !s.unrestored[rec.owner()] {
			continue
		}
		if err := s.attach(ctx, rec); err != nil {
			s.stats.restoreFailed()
			errs = append(errs, fmt.Errorf("restoring container %s interface %s: %w", rec.ContainerID, rec.IfName, err))
			continue
		}
		delete(s.unrestored, rec.owner())
		klog.InfoS("Restored a pod on retry", "container", rec.ContainerID, "ifName", rec.IfName)
	}
	return errors.Join(errs...)
}

// flushState writes the pod records and address reservations kept in memory.
func (s *Server) flushState() error {
	err := errors.Join(s.store.flush(), s.ipam.Flush())
	if err == nil && s.unsavedReported {
		klog.InfoS("CNI state kept in memory while the disk was full is saved")
		s.unsavedReported = false
	}
	return err
}

// noteUnsaved reports, once until it is saved, that state is kept in memory only.
func (s *Server) noteUnsaved() {
	recs, addrs := len(s.store.unsaved), s.ipam.Unsaved()
	if recs+addrs == 0 || s.unsavedReported {
		return
	}
	s.unsavedReported = true
	err := fmt.Errorf("the disk holding %s is full: %d pod records and %d address reservations are kept in memory "+
		"and saved when there is room again; an agent restart before then loses them", s.opts.StateDir, recs, addrs)
	klog.ErrorS(err, "CNI state not saved")
	if s.opts.Reporter != nil {
		s.opts.Reporter.StateUnsaved(err)
	}
}

// replaySpool carries out the DELs the plugin spooled and removes them. A file that is not a
// valid spooled DEL is quarantined; a DEL that fails stays in the spool for the next call.
func (s *Server) replaySpool(ctx context.Context) {
	if s.opts.SpoolDir == "" {
		return
	}
	reqs, bad, err := protocol.ReadSpool(s.opts.SpoolDir)
	if err != nil {
		klog.ErrorS(err, "Cannot read the DEL spool; retrying later", "dir", s.opts.SpoolDir)
		s.stats.restoreFailed()
		return
	}
	for _, p := range bad {
		s.quarantineFile(KindSpooledDel, p, errors.New("not a readable spooled CNI DEL"))
	}
	for _, r := range reqs {
		if cerr := validate(r.Request); cerr != nil {
			s.quarantineFile(KindSpooledDel, r.File, fmt.Errorf("invalid spooled DEL: %w", cerr))
			continue
		}
		resp := s.del(ctx, r.Request)
		if resp.Error != nil {
			klog.ErrorS(resp.Error, "Spooled DEL failed; it stays in the spool and is retried later",
				"container", r.Request.ContainerID, "ifName", r.Request.IfName, "file", r.File)
			s.stats.restoreFailed()
			continue
		}
		klog.InfoS("Carried out spooled DEL", "container", r.Request.ContainerID, "ifName", r.Request.IfName)
		if err := os.Remove(r.File); err != nil && !errors.Is(err, os.ErrNotExist) {
			klog.ErrorS(err, "Removing a spooled DEL that was carried out", "file", r.File)
		}
	}
}
