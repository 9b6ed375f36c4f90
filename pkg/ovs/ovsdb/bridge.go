package ovsdb

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ovn-org/libovsdb/model"
	libovsdb "github.com/ovn-org/libovsdb/ovsdb"
	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/ovsdb/vswitchd"
)

// Datapath types of a bridge.
const (
	// DatapathSystem is the kernel datapath (the OVS default).
	DatapathSystem = "system"
	// DatapathNetdev is the userspace datapath.
	DatapathNetdev = "netdev"
)

// Fail modes of a bridge.
const (
	// FailModeSecure keeps the flow table as it is when no controller is connected; a new
	// bridge starts empty and drops everything until flows are installed.
	FailModeSecure = "secure"
	// FailModeStandalone makes the bridge act as a MAC-learning switch without a controller.
	FailModeStandalone = "standalone"
)

// OpenFlow15 is the OpenFlow version antrea-proxy speaks; every bridge must enable it.
const OpenFlow15 = "OpenFlow15"

// maxNameLen is the longest network device name Linux accepts (IFNAMSIZ - 1).
const maxNameLen = 15

// BridgeConfig is the desired state of a bridge.
type BridgeConfig struct {
	// Name of the bridge, and of its local internal port and interface.
	Name string
	// DatapathType is DatapathSystem (the default when empty) or DatapathNetdev.
	DatapathType string
	// Protocols are the OpenFlow versions the bridge accepts. They must include OpenFlow15;
	// empty means OpenFlow10, OpenFlow13 and OpenFlow15.
	Protocols []string
	// FailMode is FailModeSecure (the default when empty) or FailModeStandalone.
	FailMode string
}

// DefaultProtocols returns the OpenFlow versions a bridge gets when BridgeConfig.Protocols is
// empty.
func DefaultProtocols() []string { return []string{"OpenFlow10", "OpenFlow13", OpenFlow15} }

// normalize checks cfg and fills in its defaults.
func (cfg BridgeConfig) normalize() (BridgeConfig, error) {
	if err := validateName(cfg.Name); err != nil {
		return cfg, err
	}
	switch cfg.DatapathType {
	case "":
		cfg.DatapathType = DatapathSystem
	case DatapathSystem, DatapathNetdev:
	default:
		return cfg, fmt.Errorf("unsupported datapath type %q (want %q or %q)", cfg.DatapathType, DatapathSystem, DatapathNetdev)
	}
	if len(cfg.Protocols) == 0 {
		cfg.Protocols = DefaultProtocols()
	} else {
		allowed := []string{"OpenFlow10", "OpenFlow11", "OpenFlow12", "OpenFlow13", "OpenFlow14", OpenFlow15}
		for _, p := range cfg.Protocols {
			if !slices.Contains(allowed, p) {
				return cfg, fmt.Errorf("unknown OpenFlow protocol %q", p)
			}
		}
		if !slices.Contains(cfg.Protocols, OpenFlow15) {
			return cfg, fmt.Errorf("protocols %v do not include %s", cfg.Protocols, OpenFlow15)
		}
		cfg.Protocols = slices.Clone(cfg.Protocols)
	}
	slices.Sort(cfg.Protocols)
	cfg.Protocols = slices.Compact(cfg.Protocols)
	switch cfg.FailMode {
	case "":
		cfg.FailMode = FailModeSecure
	case FailModeSecure, FailModeStandalone:
	default:
		return cfg, fmt.Errorf("unsupported fail mode %q (want %q or %q)", cfg.FailMode, FailModeSecure, FailModeStandalone)
	}
	return cfg, nil
}

// validateName checks a bridge, port or interface name.
func validateName(name string) error {
	switch {
	case name == "":
		return errors.New("name is empty")
	case len(name) > maxNameLen:
		return fmt.Errorf("name %q is longer than %d characters", name, maxNameLen)
	case strings.ContainsAny(name, "/ \t\n:"):
		return fmt.Errorf("name %q contains a character not allowed in a device name", name)
	}
	return nil
}

// EnsureBridge creates the bridge described by cfg, or updates its datapath type, protocols and
// fail mode, and makes sure the Open_vSwitch row lists it. A new bridge gets its local internal
// port and interface, named like the bridge, as `ovs-vsctl add-br` does. EnsureBridge returns
// once ovs-vswitchd has applied the configuration; calling it again with the same cfg changes
// nothing.
func (c *Client) EnsureBridge(ctx context.Context, cfg BridgeConfig) error {
	cfg, err := cfg.normalize()
	if err == nil {
		err = c.retryStale(ctx, func() error { return c.ensureBridgeOnce(ctx, cfg) })
	}
	if err != nil {
		return fmt.Errorf("ensuring bridge %q: %w", cfg.Name, err)
	}
	return nil
}

func (c *Client) ensureBridgeOnce(ctx context.Context, cfg BridgeConfig) error {
	root, err := c.root(ctx)
	if err != nil {
		return err
	}
	br := &vswitchd.Bridge{Name: cfg.Name}
	found, err := c.get(ctx, br)
	if err != nil {
		return fmt.Errorf("reading bridge: %w", err)
	}
	var ops []libovsdb.Operation
	if !found {
		ops, err = c.createBridgeOps(root, cfg)
		if err != nil {
			return err
		}
		if err := c.transactAndWait(ctx, root, ops); err != nil {
			return err
		}
		klog.InfoS("Created OVS bridge", "bridge", cfg.Name, "datapathType", cfg.DatapathType,
			"protocols", cfg.Protocols, "failMode", cfg.FailMode)
		return c.checkLocalInterface(ctx, cfg.Name)
	}

	ops, err = c.updateBridgeOps(root, br, cfg)
	if err != nil {
		return err
	}
	if len(ops) == 0 {
		if err := c.waitUpToDate(ctx); err != nil {
			return err
		}
		if c.checkLocalInterface(ctx, cfg.Name) == nil {
			return nil
		}
		// Committing a new next_cfg (with no other change) makes ovs-vswitchd reconfigure and
		// so try again to set the bridge up.
	}
	if err := c.transactAndWait(ctx, root, ops); err != nil {
		return err
	}
	if len(ops) > 0 {
		klog.InfoS("Updated OVS bridge", "bridge", cfg.Name, "datapathType", cfg.DatapathType,
			"protocols", cfg.Protocols, "failMode", cfg.FailMode)
	}
	return c.checkLocalInterface(ctx, cfg.Name)
}

// createBridgeOps inserts the bridge with its local port and interface and adds it to root.
func (c *Client) createBridgeOps(root *vswitchd.OpenvSwitch, cfg BridgeConfig) ([]libovsdb.Operation, error) {
	failMode := cfg.FailMode
	iface := &vswitchd.Interface{UUID: "newiface", Name: cfg.Name, Type: "internal"}
	port := &vswitchd.Port{UUID: "newport", Name: cfg.Name, Interfaces: []string{iface.UUID}}
	br := &vswitchd.Bridge{
		UUID:         "newbridge",
		Name:         cfg.Name,
		Ports:        []string{port.UUID},
		DatapathType: cfg.DatapathType,
		Protocols:    cfg.Protocols,
		FailMode:     &failMode,
	}
	ops, err := c.ovs.Create(iface, port, br)
	if err != nil {
		return nil, fmt.Errorf("building insert: %w", err)
	}
	addToRoot, err := c.ovs.Where(root).Mutate(root, model.Mutation{
		Field: &root.Bridges, Mutator: libovsdb.MutateOperationInsert, Value: []string{br.UUID},
	})
	if err != nil {
		return nil, fmt.Errorf("building Open_vSwitch bridges update: %w", err)
	}
	return append(ops, addToRoot...), nil
}

// updateBridgeOps returns what it takes to bring the existing bridge br in line with cfg; none
// when it already is.
func (c *Client) updateBridgeOps(root *vswitchd.OpenvSwitch, br *vswitchd.Bridge, cfg BridgeConfig) ([]libovsdb.Operation, error) {
	var fields []interface{}
	datapathType := br.DatapathType
	if datapathType == "" {
		datapathType = DatapathSystem
	}
	if datapathType != cfg.DatapathType {
		br.DatapathType = cfg.DatapathType
		fields = append(fields, &br.DatapathType)
	}
	if protocols := slices.Sorted(slices.Values(br.Protocols)); !slices.Equal(protocols, cfg.Protocols) {
		br.Protocols = cfg.Protocols
		fields = append(fields, &br.Protocols)
	}
	if br.FailMode == nil || *br.FailMode != cfg.FailMode {
		failMode := cfg.FailMode
		br.FailMode = &failMode
		fields = append(fields, &br.FailMode)
	}
	var ops []libovsdb.Operation
	if len(fields) > 0 {
		update, err := c.ovs.Where(&vswitchd.Bridge{UUID: br.UUID}).Update(br, fields...)
		if err != nil {
			return nil, fmt.Errorf("building update: %w", err)
		}
		ops = append(ops, assertExists(vswitchd.BridgeTable, br.UUID))
		ops = append(ops, update...)
	}
	if !slices.Contains(root.Bridges, br.UUID) {
		addToRoot, err := c.ovs.Where(root).Mutate(root, model.Mutation{
			Field: &root.Bridges, Mutator: libovsdb.MutateOperationInsert, Value: []string{br.UUID},
		})
		if err != nil {
			return nil, fmt.Errorf("building Open_vSwitch bridges update: %w", err)
		}
		ops = append(ops, assertExists(vswitchd.BridgeTable, br.UUID))
		ops = append(ops, addToRoot...)
	}
	return ops, nil
}

// checkLocalInterface reports whether ovs-vswitchd has set the bridge up, judging by its local
// interface (named like the bridge) once the configuration has been applied: ovs-vswitchd gives
// it an OpenFlow port number, or records why it could not. A bridge without such an interface is
// not checked.
func (c *Client) checkLocalInterface(ctx context.Context, name string) error {
	iface := &vswitchd.Interface{Name: name}
	found, err := c.get(ctx, iface)
	if err != nil || !found {
		return err
	}
	switch {
	case iface.Ofport != nil && *iface.Ofport > 0:
		return nil
	case iface.Error != nil:
		return fmt.Errorf("local interface error: %s", *iface.Error)
	}
	return errors.New("ovs-vswitchd did not set the bridge up (its local interface has no OpenFlow port; see the ovs-vswitchd log)")
}

// BridgeExternalIDs returns the external_ids of bridge, read from the server rather than the
// cache so that it reflects every write that has completed.
func (c *Client) BridgeExternalIDs(ctx context.Context, bridge string) (map[string]string, error) {
	ids, err := c.bridgeExternalIDs(ctx, bridge)
	if err != nil {
		return nil, fmt.Errorf("reading external_ids of bridge %q: %w", bridge, err)
	}
	return ids, nil
}

func (c *Client) bridgeExternalIDs(ctx context.Context, bridge string) (map[string]string, error) {
	var br vswitchd.Bridge
	where := libovsdb.Condition{Column: "name", Function: libovsdb.ConditionEqual, Value: bridge}
	if err := c.selectOne(ctx, vswitchd.BridgeTable, where, "external_ids", &br); err != nil {
		if errors.Is(err, errNoRow) {
			return nil, errors.New("bridge not found")
		}
		return nil, err
	}
	if br.ExternalIDs == nil {
		return map[string]string{}, nil
	}
	return br.ExternalIDs, nil
}

// SetBridgeExternalIDs sets the given keys in the external_ids of bridge, replacing their old
// values and leaving other keys alone.
func (c *Client) SetBridgeExternalIDs(ctx context.Context, bridge string, ids map[string]string) error {
	if len(ids) == 0 {
		return nil
	}
	br := &vswitchd.Bridge{Name: bridge}
	// OVSDB's map insert keeps existing keys, so delete them first.
	err := c.mutateBridge(ctx, br,
		model.Mutation{Field: &br.ExternalIDs, Mutator: libovsdb.MutateOperationDelete, Value: slices.Sorted(maps.Keys(ids))},
		model.Mutation{Field: &br.ExternalIDs, Mutator: libovsdb.MutateOperationInsert, Value: maps.Clone(ids)})
	if err != nil {
		return fmt.Errorf("setting external_ids %v of bridge %q: %w", slices.Sorted(maps.Keys(ids)), bridge, err)
	}
	return nil
}

// RemoveBridgeExternalIDs deletes the given keys from the external_ids of bridge. Missing keys
// are ignored.
func (c *Client) RemoveBridgeExternalIDs(ctx context.Context, bridge string, keys ...string) error {
	if len(keys) == 0 {
		return nil
	}
	br := &vswitchd.Bridge{Name: bridge}
	err := c.mutateBridge(ctx, br,
		model.Mutation{Field: &br.ExternalIDs, Mutator: libovsdb.MutateOperationDelete, Value: slices.Clone(keys)})
	if err != nil {
		return fmt.Errorf("removing external_ids %v of bridge %q: %w", keys, bridge, err)
	}
	return nil
}

// mutateBridge applies mutations to the bridge named br.Name, selected on the server by name.
func (c *Client) mutateBridge(ctx context.Context, br *vswitchd.Bridge, mutations ...model.Mutation) error {
	if c.closed.Load() {
		return ErrClosed
	}
	ops, err := c.ovs.Where(br).Mutate(br, mutations...)
	if err != nil {
		return fmt.Errorf("building mutation: %w", err)
	}
	results, err := c.transact(ctx, ops)
	if err != nil {
		return err
	}
	if results[0].Count == 0 {
		return errors.New("bridge not found")
	}
	return nil
}

// errNoRow is selectOne's error when no row matches.
var errNoRow = errors.New("no such row")

// selectOne reads column of the first row of table that where selects into row (a model
// pointer), straight from the server: the client's cache does not monitor every column.
func (c *Client) selectOne(ctx context.Context, table string, where libovsdb.Condition, column string, row any) error {
	results, err := c.transact(ctx, []libovsdb.Operation{{
		Op: libovsdb.OperationSelect, Table: table, Where: []libovsdb.Condition{where}, Columns: []string{column},
	}})
	if err != nil {
		return err
	}
	if len(results[0].Rows) == 0 {
		return errNoRow
	}
	return c.decodeRow(results[0].Rows[0], row)
}
