package server

import (
	"context"
	"fmt"
	"strconv"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
	"github.com/antrea-proxy/antrea-proxy/pkg/reconciler"
)

// PodWriter is the CNI server as a writer of the bridge (reconciler.Options.Writers): one
// owner per pod, keyed by its OpenFlow port, of pod-category flows.
func PodWriter() reconciler.Writer {
	return reconciler.Writer{Kind: reconciler.KindPod, Categories: []pipeline.Category{pipeline.CategoryPod}}
}

// podOwner owns the flows of the pod on OpenFlow port port.
func podOwner(port uint32) reconciler.Owner {
	return reconciler.Owner{Kind: reconciler.KindPod, Key: strconv.FormatUint(uint64(port), 10)}
}

// newReconciler returns the server's own reconciler over bridge, when Options gives none.
func newReconciler(bridge openflow.Bridge, round uint16) (*reconciler.Reconciler, error) {
	return reconciler.New(reconciler.Options{Bridge: bridge, Round: round, Writers: []reconciler.Writer{PodWriter()}})
}

// Reconciler returns the reconciler the server installs its flows through: it verifies and
// replays them (the healer's owner).
func (s *Server) Reconciler() *reconciler.Reconciler { return s.rec }

// deletePodFlowsOp deletes every flow of the pod with cookie object id, of any round.
func deletePodFlowsOp(id uint32) openflow.Op {
	return openflow.Op{Kind: openflow.DeleteFlows, Flow: &openflow.Flow{
		Cookie: pipeline.PodCookie(0, uint64(id)), CookieMask: pipeline.PodCookieMask}}
}

// setPodFlows replaces, in one bundle, the flows of the pod on port (those of any round, and
// those of its previous OpenFlow port oldPort when it changed) with flows; nil flows remove
// the pod's. Call it with s.mu held.
func (s *Server) setPodFlows(ctx context.Context, port, oldPort uint32, flows []openflow.Flow) error {
	b := s.rec.Begin()
	b.Replace(podOwner(port), flows, deletePodFlowsOp(port))
	if oldPort != 0 && oldPort != port {
		b.Replace(podOwner(oldPort), nil, deletePodFlowsOp(oldPort))
	}
	return b.Commit(ctx)
}

// replaceAllPodFlows is the server's first bundle of a start: it deletes every pod flow (of any
// round, orphans included) and adds the flows of every pod installed so far. Call it with s.mu
// held.
func (s *Server) replaceAllPodFlows(ctx context.Context) error {
	b := s.rec.Begin()
	b.First(reconciler.KindPod)
	if err := b.Commit(ctx); err != nil {
		return fmt.Errorf("replacing every pod flow: %w", err)
	}
	return nil
}
