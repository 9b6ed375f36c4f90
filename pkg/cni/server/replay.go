package server

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// OwnerName is the Server's name as a healer owner (pkg/healer).
const OwnerName = "pods"

// podFlowState is what the server has installed in OVS: the flows of every pod, by cookie
// object (the pod's OpenFlow port). It is guarded by Server.mu, like every Apply of pod flows.
type podFlowState struct {
	byPort map[uint32][]openflow.Flow
	total  int
	// gen changes with every Apply of pod flows, so that Verify can tell that the flows it
	// counted were being changed.
	gen uint64
}

func (p *podFlowState) set(port uint32, flows []openflow.Flow) {
	p.forget(port)
	if p.byPort == nil {
		p.byPort = map[uint32][]openflow.Flow{}
	}
	p.byPort[port] = flows
	p.total += len(flows)
}

func (p *podFlowState) forget(port uint32) {
	p.total -= len(p.byPort[port])
	delete(p.byPort, port)
}

// Name implements healer.Owner.
func (s *Server) Name() string { return OwnerName }

// Verify implements healer.Owner: it counts this round's pod flows in OVS and compares the
// count with the flows the server installed. Before Start completes it reports no mismatch. A
// request that changes pod flows while the count runs makes the check inconclusive (no
// mismatch reported): the next check decides. The server's lock is not held while counting.
func (s *Server) Verify(ctx context.Context, c openflow.FlowCounter) (bool, error) {
	if !s.Ready() {
		return true, nil
	}
	s.mu.Lock()
	gen, want := s.flows.gen, s.flows.total
	s.mu.Unlock()
	have, err := c.CountFlows(ctx, openflow.FlowFilter{
		Cookie: pipeline.Cookie(s.opts.Round, pipeline.CategoryPod, 0), CookieMask: pipeline.RoundMask | pipeline.CategoryMask})
	if err != nil {
		return false, fmt.Errorf("counting pod flows: %w", err)
	}
	s.mu.Lock()
	changed := s.flows.gen != gen
	s.mu.Unlock()
	if changed || have == want {
		return true, nil
	}
	klog.InfoS("Pod flows in OVS differ from those installed", "installed", want, "inOVS", have, "round", s.opts.Round)
	return false, nil
}

// Replay implements healer.Owner: one bundle deletes every pod flow (of any round) and adds the
// flows of every pod the server has installed. Before Start completes it does nothing (Start
// installs everything).
func (s *Server) Replay(ctx context.Context) error {
	if !s.Ready() {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.replayLocked(ctx)
}

// replayLocked is Replay with s.mu held.
func (s *Server) replayLocked(ctx context.Context) error {
	sets := make([][]openflow.Flow, 0, len(s.flows.byPort))
	for _, flows := range s.flows.byPort {
		sets = append(sets, flows)
	}
	ops := pipeline.ReplaceCategory(pipeline.CategoryPod, sets...)
	s.flows.gen++
	if err := s.bridge.Apply(ctx, ops); err != nil {
		return fmt.Errorf("replaying the flows of %d pods: %w", len(s.flows.byPort), err)
	}
	return nil
}
