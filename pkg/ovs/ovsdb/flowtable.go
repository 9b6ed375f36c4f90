package ovsdb

import (
	"context"
	"errors"
	"fmt"

	libovsdb "github.com/ovn-org/libovsdb/ovsdb"
	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/ovsdb/vswitchd"
)

// EnsureFlowTableLimit bounds OpenFlow table table of bridge to limit flows with overflow
// policy refuse (a Flow_Table row in the bridge's flow_tables): ovs-vswitchd then refuses any
// flow added beyond the limit, a flow a learn action adds included, while a flow that replaces
// one with the same match still goes in. The row is configuration: it outlives an
// ovs-vswitchd restart. Calling it again with the same values changes nothing; another limit
// updates the row.
func (c *Client) EnsureFlowTableLimit(ctx context.Context, bridge string, table, limit int) error {
	if limit <= 0 || table < 0 || table > 254 {
		return fmt.Errorf("flow table %d limit %d of bridge %q: table must be in [0, 254] and limit positive", table, limit, bridge)
	}
	err := c.retryStale(ctx, func() error { return c.ensureFlowTableLimitOnce(ctx, bridge, table, limit) })
	if err != nil {
		return fmt.Errorf("flow table %d limit of bridge %q: %w", table, bridge, err)
	}
	return nil
}

func (c *Client) ensureFlowTableLimitOnce(ctx context.Context, bridge string, table, limit int) error {
	root, err := c.root(ctx)
	if err != nil {
		return err
	}
	br := &vswitchd.Bridge{Name: bridge}
	if err := c.selectOne(ctx, vswitchd.BridgeTable, nameIs(bridge), "flow_tables", br); err != nil {
		return fmt.Errorf("reading bridge: %w", err)
	}
	refuse := vswitchd.FlowTableOverflowPolicyRefuse
	if id, ok := br.FlowTables[table]; ok {
		var ft vswitchd.FlowTable
		if err := c.selectOne(ctx, vswitchd.FlowTableTable, uuidIs(id), "flow_limit", &ft); err != nil {
			if errors.Is(err, errNoRow) {
				return stale("Flow_Table %s disappeared", id)
			}
			return fmt.Errorf("reading Flow_Table %s: %w", id, err)
		}
		var policy vswitchd.FlowTable
		if err := c.selectOne(ctx, vswitchd.FlowTableTable, uuidIs(id), "overflow_policy", &policy); err != nil {
			return fmt.Errorf("reading Flow_Table %s: %w", id, err)
		}
		if ft.FlowLimit != nil && *ft.FlowLimit == limit && policy.OverflowPolicy != nil && *policy.OverflowPolicy == refuse {
			return nil
		}
		update := libovsdb.Operation{Op: libovsdb.OperationUpdate, Table: vswitchd.FlowTableTable, Where: []libovsdb.Condition{uuidIs(id)},
			Row: libovsdb.Row{"flow_limit": limit, "overflow_policy": refuse}}
		return c.commitFlowTable(ctx, root, []libovsdb.Operation{update}, bridge, table, limit)
	}
	const named = "newflowtable"
	insert := libovsdb.Operation{Op: libovsdb.OperationInsert, Table: vswitchd.FlowTableTable, UUIDName: named,
		Row: libovsdb.Row{"flow_limit": limit, "overflow_policy": refuse}}
	m, err := libovsdb.NewOvsMap(map[int]libovsdb.UUID{table: {GoUUID: named}})
	if err != nil {
		return err
	}
	attach := libovsdb.Operation{Op: libovsdb.OperationMutate, Table: vswitchd.BridgeTable, Where: []libovsdb.Condition{nameIs(bridge)},
		Mutations: []libovsdb.Mutation{{Column: "flow_tables", Mutator: libovsdb.MutateOperationInsert, Value: m}}}
	return c.commitFlowTable(ctx, root, []libovsdb.Operation{insert, attach}, bridge, table, limit)
}

func (c *Client) commitFlowTable(ctx context.Context, root *vswitchd.OpenvSwitch, ops []libovsdb.Operation, bridge string, table, limit int) error {
	if err := c.transactAndWait(ctx, root, ops); err != nil {
		return err
	}
	klog.InfoS("Set OpenFlow table flow limit", "bridge", bridge, "table", table, "flowLimit", limit, "overflowPolicy", "refuse")
	return nil
}

func nameIs(name string) libovsdb.Condition {
	return libovsdb.Condition{Column: "name", Function: libovsdb.ConditionEqual, Value: name}
}
