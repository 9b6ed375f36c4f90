package agent

import (
	"context"

	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// flowTableDB writes the bridge's OVSDB Flow_Table rows (the OVSDB client): the tables' names
// and the SessionAffinity table's flow limit.
type flowTableDB interface {
	EnsureFlowTableNames(ctx context.Context, bridge string, names map[uint8]string) error
	EnsureFlowTableLimit(ctx context.Context, bridge string, table, limit int) error
}

// nameFlowTables names the pipeline's tables in OVSDB (pipeline.TableNames), so that
// `ovs-ofctl --names dump-flows` and an interactive ovs-ofctl show them as the agent's dumps
// do. A name changes nothing OVS does; failing to set them is logged and changes nothing else.
func nameFlowTables(ctx context.Context, db flowTableDB, bridge string) {
	if err := db.EnsureFlowTableNames(ctx, bridge, pipeline.TableNames); err != nil {
		klog.ErrorS(err, "Cannot name the OpenFlow tables; ovs-ofctl shows them by number", "bridge", bridge)
	}
}
