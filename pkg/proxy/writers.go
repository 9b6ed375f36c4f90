package proxy

import (
	"fmt"

	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
	"github.com/antrea-proxy/antrea-proxy/pkg/reconciler"
)

// useReconciler makes the proxier install through r (nil: one of its own over bridge) and adds
// its writers to it: the node-level flows (KindNode; before the first sync, a replay installs
// them through InstallBaseFlows) and the Service ports (KindServicePort; ranked by rankOwners,
// with the learned session affinity flows beside theirs).
func (p *Proxier) useReconciler(r *reconciler.Reconciler, bridge Bridge) error {
	if r == nil {
		var err error
		if r, err = reconciler.New(reconciler.Options{Bridge: bridge, Round: p.round}); err != nil {
			return fmt.Errorf("proxy: %w", err)
		}
	}
	if r.Round() != p.round {
		return fmt.Errorf("proxy: the reconciler's round %d is not round %d", r.Round(), p.round)
	}
	err := r.AddWriter(
		reconciler.Writer{Kind: reconciler.KindNode, Categories: []pipeline.Category{pipeline.CategoryBase},
			Unstarted: p.InstallBaseFlows},
		reconciler.Writer{Kind: reconciler.KindServicePort, Categories: []pipeline.Category{pipeline.CategoryService, pipeline.CategoryEndpoint},
			Learned: []uint8{pipeline.TableSessionAffinity}, Rank: p.rankOwners},
	)
	if err != nil {
		return fmt.Errorf("proxy: %w", err)
	}
	p.bridgeState = r
	return nil
}

// Reconciler returns the reconciler the proxier installs through: it verifies and replays the
// proxier's flows and groups with the other writers' (the healer's owner).
func (p *Proxier) Reconciler() *reconciler.Reconciler { return p.bridgeState }

// isProxierOwner reports whether o is one of the proxier's owners.
func isProxierOwner(o reconciler.Owner) bool {
	return o.Kind == reconciler.KindNode || o.Kind == reconciler.KindServicePort
}
