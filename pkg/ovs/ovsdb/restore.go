package ovsdb

import (
	"context"
	"errors"
	"fmt"

	"github.com/ovn-org/libovsdb/model"
	libovsdb "github.com/ovn-org/libovsdb/ovsdb"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/ovsdb/vswitchd"
)

// FlowRestoreWaitKey is the Open_vSwitch other_config key that makes a starting ovs-vswitchd
// keep the datapath's flows (and not process packets with an empty OpenFlow table) until its
// controller has restored the OpenFlow flows and clears the key.
const FlowRestoreWaitKey = "flow-restore-wait"

// SetFlowRestoreWait sets other_config:flow-restore-wait=true in the Open_vSwitch row (on), or
// removes the key (off), which tells a waiting ovs-vswitchd that the flows are restored. Other
// keys are left alone; removing an absent key is not an error.
func (c *Client) SetFlowRestoreWait(ctx context.Context, on bool) error {
	if err := c.setFlowRestoreWait(ctx, on); err != nil {
		return fmt.Errorf("setting other_config:%s=%v: %w", FlowRestoreWaitKey, on, err)
	}
	return nil
}

func (c *Client) setFlowRestoreWait(ctx context.Context, on bool) error {
	root, err := c.root(ctx)
	if err != nil {
		return err
	}
	mutations := []model.Mutation{{Field: &root.OtherConfig, Mutator: libovsdb.MutateOperationDelete, Value: []string{FlowRestoreWaitKey}}}
	if on {
		// OVSDB's map insert keeps an existing key, so the delete above goes first.
		mutations = append(mutations, model.Mutation{Field: &root.OtherConfig, Mutator: libovsdb.MutateOperationInsert,
			Value: map[string]string{FlowRestoreWaitKey: "true"}})
	}
	ops, err := c.ovs.Where(root).Mutate(root, mutations...)
	if err != nil {
		return fmt.Errorf("building mutation: %w", err)
	}
	results, err := c.transact(ctx, ops)
	if err != nil {
		return err
	}
	if results[0].Count == 0 {
		return fmt.Errorf("Open_vSwitch row %s disappeared", root.UUID)
	}
	return nil
}

// FlowRestoreWait reports whether other_config:flow-restore-wait is true in the Open_vSwitch
// row, read from the server (the client's cache does not hold other_config).
func (c *Client) FlowRestoreWait(ctx context.Context) (bool, error) {
	on, err := c.flowRestoreWait(ctx)
	if err != nil {
		return false, fmt.Errorf("reading other_config:%s: %w", FlowRestoreWaitKey, err)
	}
	return on, nil
}

func (c *Client) flowRestoreWait(ctx context.Context) (bool, error) {
	root, err := c.root(ctx)
	if err != nil {
		return false, err
	}
	var row vswitchd.OpenvSwitch
	if err := c.selectOne(ctx, vswitchd.OpenvSwitchTable, uuidIs(root.UUID), "other_config", &row); err != nil {
		if errors.Is(err, errNoRow) {
			return false, errors.New("the Open_vSwitch row disappeared")
		}
		return false, err
	}
	// ovs-vswitchd treats only "true" as set (smap_get_bool).
	return row.OtherConfig[FlowRestoreWaitKey] == "true", nil
}
