package ovsdb

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	libovsdb "github.com/ovn-org/libovsdb/ovsdb"
	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/ovsdb/vswitchd"
)

// EnsureFlowTableNames names OpenFlow tables of bridge (the name column of their Flow_Table
// rows, which ovs-ofctl --names prints instead of the number): a table without a row gets one
// holding only its name, a row with another name is updated, and nothing else of a row (its
// flow limit) changes. A name changes nothing OVS does. Calling it again with the same names
// writes nothing.
func (c *Client) EnsureFlowTableNames(ctx context.Context, bridge string, names map[uint8]string) error {
	err := c.retryStale(ctx, func() error { return c.ensureFlowTableNamesOnce(ctx, bridge, names) })
	if err != nil {
		return fmt.Errorf("flow table names of bridge %q: %w", bridge, err)
	}
	return nil
}

func (c *Client) ensureFlowTableNamesOnce(ctx context.Context, bridge string, names map[uint8]string) error {
	br := &vswitchd.Bridge{Name: bridge}
	if err := c.selectOne(ctx, vswitchd.BridgeTable, nameIs(bridge), "flow_tables", br); err != nil {
		return fmt.Errorf("reading bridge: %w", err)
	}
	var ops []libovsdb.Operation
	inserts := map[int]libovsdb.UUID{}
	for _, table := range slices.Sorted(maps.Keys(names)) {
		name := names[table]
		id, ok := br.FlowTables[int(table)]
		if !ok {
			named := fmt.Sprintf("flowtable%d", table)
			ops = append(ops, libovsdb.Operation{Op: libovsdb.OperationInsert, Table: vswitchd.FlowTableTable,
				UUIDName: named, Row: libovsdb.Row{"name": name}})
			inserts[int(table)] = libovsdb.UUID{GoUUID: named}
			continue
		}
		var ft vswitchd.FlowTable
		if err := c.selectOne(ctx, vswitchd.FlowTableTable, uuidIs(id), "name", &ft); err != nil {
			if errors.Is(err, errNoRow) {
				return stale("Flow_Table %s disappeared", id)
			}
			return fmt.Errorf("reading Flow_Table %s: %w", id, err)
		}
		if ft.Name == nil || *ft.Name != name {
			ops = append(ops, libovsdb.Operation{Op: libovsdb.OperationUpdate, Table: vswitchd.FlowTableTable,
				Where: []libovsdb.Condition{uuidIs(id)}, Row: libovsdb.Row{"name": name}})
		}
	}
	if len(inserts) > 0 {
		m, err := libovsdb.NewOvsMap(inserts)
		if err != nil {
			return err
		}
		ops = append(ops, libovsdb.Operation{Op: libovsdb.OperationMutate, Table: vswitchd.BridgeTable,
			Where:     []libovsdb.Condition{nameIs(bridge)},
			Mutations: []libovsdb.Mutation{{Column: "flow_tables", Mutator: libovsdb.MutateOperationInsert, Value: m}}})
	}
	if len(ops) == 0 {
		return nil
	}
	root, err := c.root(ctx)
	if err != nil {
		return err
	}
	if err := c.transactAndWait(ctx, root, ops); err != nil {
		return err
	}
	klog.InfoS("Named OpenFlow tables", "bridge", bridge, "tables", len(names), "written", len(ops))
	return nil
}
