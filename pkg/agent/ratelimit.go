package agent

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	"github.com/antrea-proxy/antrea-proxy/pkg/healer"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/ofconn"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/reject"
)

// affinityTableMargin is how many flows of its own the agent may hold in the SessionAffinity
// table (its miss flow, one per round while a new round replaces the old) on top of
// antreaProxy.rateLimits.affinityFlowsTotal: the table's OVS flow limit is their sum.
const affinityTableMargin = 4

// rateLimitBridge is what the rate limits need of the OpenFlow backend: meters and the
// statistics their metrics read. Both backends implement it.
type rateLimitBridge interface {
	openflow.Meters
	openflow.TableCounter
	openflow.AggregateReader
}

// rejectLimits is the healer.Owner of the reject meters (pipeline.RejectLimit): the
// proxier's RejectMeter flows use them, so they are installed before any proxier flow and
// replayed first after ovs-vswitchd restarts (meters are lost with it, and OVS refuses a flow
// whose meter does not exist).
type rejectLimits struct {
	b     rateLimitBridge
	limit pipeline.RejectLimit
}

var _ healer.Owner = (*rejectLimits)(nil)

// Name implements healer.Owner.
func (*rejectLimits) Name() string { return "reject-limits" }

// Verify implements healer.Owner: the first meter must exist (a vswitchd restart loses them
// all; the reset replays every owner anyway).
func (r *rejectLimits) Verify(ctx context.Context, _ openflow.FlowCounter) (bool, error) {
	if _, err := r.b.MeterStats(ctx, pipeline.FirstRejectMeter); err != nil {
		klog.V(2).InfoS("Reject meter missing", "meter", pipeline.FirstRejectMeter, "err", err)
		return false, nil
	}
	return true, nil
}

// Replay implements healer.Owner: every meter, added or modified.
func (r *rejectLimits) Replay(ctx context.Context) error {
	for _, m := range r.limit.MeterList() {
		if err := r.b.SetMeter(ctx, m); err != nil {
			return fmt.Errorf("reject meter %d: %w", m.ID, err)
		}
	}
	return nil
}

// setupRateLimits applies antreaProxy.rateLimits before the proxier's first sync: the reject
// meters, the per-Service affinity bound (a pipeline option), and the node bound as
// the SessionAffinity table's flow limit. When the meters cannot be installed (a datapath
// without meters) rejected packets go to the responder unmetered, and the returned
// owner is nil; its rate limits in the agent still hold. It writes the bridge's Flow_Table
// rows, so it names the tables first (nameFlowTables).
func setupRateLimits(ctx context.Context, cfg *config.AgentConfig, db flowTableDB, b rateLimitBridge, opts *proxy.Options) *rejectLimits {
	nameFlowTables(ctx, db, cfg.OVSBridge)
	l := cfg.AntreaProxy.RateLimits.WithDefaults()
	opts.AffinityFlowsPerService = uint32(l.AffinityFlowsPerService)
	limit := l.AffinityFlowsTotal + affinityTableMargin
	if err := db.EnsureFlowTableLimit(ctx, cfg.OVSBridge, int(pipeline.TableSessionAffinity), limit); err != nil {
		klog.ErrorS(err, "Cannot bound the session affinity table; learned flows are bounded per Service only", "flowLimit", limit)
	}
	r := &rejectLimits{b: b, limit: pipeline.RejectLimit{Rate: uint32(l.RejectMeterRate), Burst: uint32(l.RejectMeterBurst), Meters: uint32(l.RejectMeters)}}
	if err := r.Replay(ctx); err != nil {
		klog.ErrorS(err, "Cannot install the reject meters; rejected packets reach the agent unmetered", "meters", l.RejectMeters)
		return nil
	}
	opts.RejectMeters = r.limit.Meters
	klog.InfoS("Reject meters installed", "meters", r.limit.Meters, "rate", r.limit.Rate, "burst", r.limit.Burst,
		"affinityFlowsPerService", l.AffinityFlowsPerService, "affinityFlowsTotal", l.AffinityFlowsTotal)
	return r
}

// rejectAccept selects the packet-ins of the reject flows: those of ServiceLB's Service flows
// (unmetered) and those of RejectMeter (metered).
func rejectAccept() func(*ofconn.PacketIn) bool {
	lb := reject.FromFlows(pipeline.TableServiceLB, pipeline.Cookie(0, pipeline.CategoryService, 0), pipeline.CategoryMask)
	metered := reject.FromFlows(pipeline.TableRejectMeter, pipeline.Cookie(0, pipeline.CategoryBase, 0), pipeline.CategoryMask)
	return func(pi *ofconn.PacketIn) bool { return lb(pi) || metered(pi) }
}
