package ovsdb

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/ovn-org/libovsdb/model"
	libovsdb "github.com/ovn-org/libovsdb/ovsdb"
	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/ovsdb/vswitchd"
)

// ZoneTimeouts is the conntrack timeout policy of some zones of one datapath type: the
// Datapath, CT_Zone and CT_Timeout_Policy rows `ovs-vsctl add-zone-tp` writes.
type ZoneTimeouts struct {
	// DatapathType is DatapathSystem or DatapathNetdev.
	DatapathType string
	// Zones get the policy.
	Zones []int
	// Timeouts in seconds by CT_Timeout_Policy key (e.g. "tcp_close"); keys not given keep the
	// datapath's default.
	Timeouts map[string]int
}

// EnsureZoneTimeouts gives every zone of zt.Zones a timeout policy with exactly zt.Timeouts,
// creating the datapath's Datapath row if needed, and returns once ovs-vswitchd has applied it.
// Zones that already have that policy are left alone; other zones of the datapath are not
// touched. Connections committed before take the policy only when they are committed again.
func (c *Client) EnsureZoneTimeouts(ctx context.Context, zt ZoneTimeouts) error {
	if zt.DatapathType == "" || len(zt.Zones) == 0 || len(zt.Timeouts) == 0 {
		return fmt.Errorf("zone timeouts %+v: a datapath type, zones and timeouts are required", zt)
	}
	if err := c.retryStale(ctx, func() error { return c.ensureZoneTimeoutsOnce(ctx, zt) }); err != nil {
		return fmt.Errorf("conntrack zone timeouts of datapath %s: %w", zt.DatapathType, err)
	}
	return nil
}

func (c *Client) ensureZoneTimeoutsOnce(ctx context.Context, zt ZoneTimeouts) error {
	root, err := c.root(ctx)
	if err != nil {
		return err
	}
	var withDatapaths vswitchd.OpenvSwitch
	if err := c.selectOne(ctx, vswitchd.OpenvSwitchTable, uuidIs(root.UUID), "datapaths", &withDatapaths); err != nil {
		return fmt.Errorf("reading Open_vSwitch datapaths: %w", err)
	}
	dp := &vswitchd.Datapath{UUID: withDatapaths.Datapaths[zt.DatapathType]}
	if dp.UUID != "" {
		if err := c.selectOne(ctx, vswitchd.DatapathTable, uuidIs(dp.UUID), "ct_zones", dp); err != nil {
			return fmt.Errorf("reading Datapath %s: %w", dp.UUID, err)
		}
	}
	var stale []int
	for _, zone := range zt.Zones {
		ok, err := c.zoneHasTimeouts(ctx, dp.CTZones[zone], zt.Timeouts)
		if err != nil {
			return err
		}
		if !ok {
			stale = append(stale, zone)
		}
	}
	if len(stale) == 0 {
		return nil
	}
	ops, err := c.zoneTimeoutOps(root, zt.DatapathType, dp, stale, zt.Timeouts)
	if err != nil {
		return err
	}
	if err := c.transactAndWait(ctx, root, ops); err != nil {
		return err
	}
	klog.InfoS("Set conntrack zone timeouts", "datapathType", zt.DatapathType, "zones", stale, "timeouts", zt.Timeouts)
	return nil
}

// zoneHasTimeouts reports whether the CT_Zone row id ("" for none) has a policy of exactly
// timeouts.
func (c *Client) zoneHasTimeouts(ctx context.Context, id string, timeouts map[string]int) (bool, error) {
	if id == "" {
		return false, nil
	}
	var zone vswitchd.CTZone
	if err := c.selectOne(ctx, vswitchd.CTZoneTable, uuidIs(id), "timeout_policy", &zone); err != nil {
		if errors.Is(err, errNoRow) {
			return false, stale("CT_Zone %s disappeared", id)
		}
		return false, fmt.Errorf("reading CT_Zone %s: %w", id, err)
	}
	if zone.TimeoutPolicy == nil {
		return false, nil
	}
	var tp vswitchd.CTTimeoutPolicy
	if err := c.selectOne(ctx, vswitchd.CTTimeoutPolicyTable, uuidIs(*zone.TimeoutPolicy), "timeouts", &tp); err != nil {
		if errors.Is(err, errNoRow) {
			return false, stale("CT_Timeout_Policy %s disappeared", *zone.TimeoutPolicy)
		}
		return false, fmt.Errorf("reading CT_Timeout_Policy %s: %w", *zone.TimeoutPolicy, err)
	}
	return maps.Equal(tp.Timeouts, timeouts), nil
}

// zoneTimeoutOps inserts a CT_Timeout_Policy and a CT_Zone for each of zones and points the
// datapath's ct_zones at them (replacing what they pointed at, which OVSDB then collects), or,
// when dp has no UUID, inserts the Datapath row of dpType too and adds it to root.
func (c *Client) zoneTimeoutOps(root *vswitchd.OpenvSwitch, dpType string, dp *vswitchd.Datapath, zones []int, timeouts map[string]int) ([]libovsdb.Operation, error) {
	var models []model.Model
	newZones := map[int]string{}
	for _, zone := range slices.Sorted(slices.Values(zones)) {
		tp := &vswitchd.CTTimeoutPolicy{UUID: fmt.Sprintf("newtp%d", zone), Timeouts: maps.Clone(timeouts)}
		z := &vswitchd.CTZone{UUID: fmt.Sprintf("newzone%d", zone), TimeoutPolicy: &tp.UUID}
		models = append(models, tp, z)
		newZones[zone] = z.UUID
	}
	if dp.UUID == "" {
		return c.newDatapathOps(root, dpType, models, newZones)
	}
	ops, err := c.ovs.Create(models...)
	if err != nil {
		return nil, fmt.Errorf("building CT_Zone inserts: %w", err)
	}
	drop, err := c.ovs.Where(dp).Mutate(dp, model.Mutation{
		Field: &dp.CTZones, Mutator: libovsdb.MutateOperationDelete, Value: slices.Collect(maps.Keys(newZones)),
	})
	if err != nil {
		return nil, fmt.Errorf("building Datapath ct_zones update: %w", err)
	}
	add, err := c.ovs.Where(dp).Mutate(dp, model.Mutation{
		Field: &dp.CTZones, Mutator: libovsdb.MutateOperationInsert, Value: newZones,
	})
	if err != nil {
		return nil, fmt.Errorf("building Datapath ct_zones update: %w", err)
	}
	ops = append(ops, assertExists(vswitchd.DatapathTable, dp.UUID))
	return append(append(ops, drop...), add...), nil
}

// newDatapathOps inserts models, a Datapath row with ct_zones zones, and adds it to root's
// datapaths as dpType.
func (c *Client) newDatapathOps(root *vswitchd.OpenvSwitch, dpType string, models []model.Model, zones map[int]string) ([]libovsdb.Operation, error) {
	dp := &vswitchd.Datapath{UUID: "newdatapath", CTZones: zones}
	ops, err := c.ovs.Create(append(models, dp)...)
	if err != nil {
		return nil, fmt.Errorf("building Datapath insert: %w", err)
	}
	addToRoot, err := c.ovs.Where(root).Mutate(root, model.Mutation{
		Field: &root.Datapaths, Mutator: libovsdb.MutateOperationInsert, Value: map[string]string{dpType: dp.UUID},
	})
	if err != nil {
		return nil, fmt.Errorf("building Open_vSwitch datapaths update: %w", err)
	}
	return append(ops, addToRoot...), nil
}
