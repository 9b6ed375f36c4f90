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

// PortType is the type of a port's interface.
type PortType string

const (
	// PortTypeSystem attaches an existing network device (e.g. one end of a veth pair).
	PortTypeSystem PortType = ""
	// PortTypeInternal makes OVS create a network device for the port.
	PortTypeInternal PortType = "internal"
	// PortTypePatch connects two bridges; PortConfig.PeerName names the other end.
	PortTypePatch PortType = "patch"
)

// maxOFPortRequest is the highest OpenFlow port number that can be requested (OFPP_MAX - 1).
const maxOFPortRequest = 0xfeff

// PortConfig is the desired state of a port with a single interface of the same name.
type PortConfig struct {
	// Name of the port and its interface.
	Name string
	// Type of the interface; "system" is accepted as PortTypeSystem.
	Type PortType
	// PeerName is the patch port at the other end; required for, and only allowed with,
	// PortTypePatch.
	PeerName string
	// ExternalIDs are merged into the external_ids of both the port and the interface.
	ExternalIDs map[string]string
	// RequestedOFPort asks OVS for this OpenFlow port number; 0 lets OVS choose.
	RequestedOFPort int32
}

// normalize checks cfg and brings it into canonical form.
func (cfg PortConfig) normalize() (PortConfig, error) {
	if err := validateName(cfg.Name); err != nil {
		return cfg, err
	}
	switch cfg.Type {
	case "system":
		cfg.Type = PortTypeSystem
	case PortTypeSystem, PortTypeInternal:
	case PortTypePatch:
		if cfg.PeerName == "" {
			return cfg, errors.New("a patch port needs a peer name")
		}
		if err := validateName(cfg.PeerName); err != nil {
			return cfg, fmt.Errorf("peer: %w", err)
		}
	default:
		return cfg, fmt.Errorf("unsupported port type %q", cfg.Type)
	}
	if cfg.Type != PortTypePatch && cfg.PeerName != "" {
		return cfg, fmt.Errorf("peer name %q given for a port of type %q", cfg.PeerName, cfg.Type)
	}
	if cfg.RequestedOFPort < 0 || cfg.RequestedOFPort > maxOFPortRequest {
		return cfg, fmt.Errorf("requested OpenFlow port %d is outside 1-%d", cfg.RequestedOFPort, maxOFPortRequest)
	}
	return cfg, nil
}

// options is the interface options column that cfg asks for, given the current one.
func (cfg PortConfig) options(current map[string]string) map[string]string {
	opts := maps.Clone(current)
	if opts == nil {
		opts = map[string]string{}
	}
	if cfg.Type == PortTypePatch {
		opts["peer"] = cfg.PeerName
	} else {
		delete(opts, "peer")
	}
	return opts
}

// ofportRequest is the ofport_request column that cfg asks for.
func (cfg PortConfig) ofportRequest() *int {
	if cfg.RequestedOFPort == 0 {
		return nil
	}
	n := int(cfg.RequestedOFPort)
	return &n
}

// EnsurePort creates the port cfg.Name with its interface on bridge, or brings an existing one in
// line with cfg, then waits until ovs-vswitchd has given the interface an OpenFlow port number
// and returns it. When ovs-vswitchd cannot set the interface up, the error carries the reason it
// recorded in Interface.error. A port that already exists on another bridge is an error.
func (c *Client) EnsurePort(ctx context.Context, bridge string, cfg PortConfig) (int32, error) {
	cfg, err := cfg.normalize()
	var ofport int32
	if err == nil {
		err = c.retryStale(ctx, func() error {
			var err error
			ofport, err = c.ensurePortOnce(ctx, bridge, cfg)
			return err
		})
	}
	if err != nil {
		return 0, fmt.Errorf("ensuring port %q on bridge %q: %w", cfg.Name, bridge, err)
	}
	return ofport, nil
}

func (c *Client) ensurePortOnce(ctx context.Context, bridge string, cfg PortConfig) (int32, error) {
	root, err := c.root(ctx)
	if err != nil {
		return 0, err
	}
	br := &vswitchd.Bridge{Name: bridge}
	if found, err := c.get(ctx, br); err != nil {
		return 0, fmt.Errorf("reading bridge: %w", err)
	} else if !found {
		return 0, errors.New("bridge not found")
	}
	port := &vswitchd.Port{Name: cfg.Name}
	found, err := c.get(ctx, port)
	if err != nil {
		return 0, fmt.Errorf("reading port: %w", err)
	}
	if !found {
		ops, err := c.createPortOps(br, cfg)
		if err != nil {
			return 0, err
		}
		if err := c.transactAndWait(ctx, root, ops); err != nil {
			return 0, err
		}
		ofport, err := c.waitOFPort(ctx, cfg.Name)
		if err != nil {
			return 0, err
		}
		klog.InfoS("Created OVS port", "bridge", bridge, "port", cfg.Name, "type", cfg.Type, "ofport", ofport)
		return ofport, nil
	}

	if !slices.Contains(br.Ports, port.UUID) {
		// The bridge was read before the port, so look again: the port may just have been
		// added to this bridge.
		switch owner, err := c.bridgeOfPort(ctx, port.UUID); {
		case err != nil:
			return 0, err
		case owner == "":
			return 0, stale("port is on no bridge")
		case owner != bridge:
			return 0, fmt.Errorf("port already exists on bridge %q", owner)
		}
	}
	iface, err := c.portInterface(ctx, port)
	if err != nil {
		return 0, err
	}
	ops, err := c.updatePortOps(port, iface, cfg)
	if err != nil {
		return 0, err
	}
	healthy := iface.Ofport != nil && *iface.Ofport > 0
	if len(ops) == 0 && healthy {
		if err := c.waitUpToDate(ctx); err != nil {
			return 0, err
		}
		return c.waitOFPort(ctx, cfg.Name)
	}
	// Even without changes, committing a new next_cfg makes ovs-vswitchd reconfigure and so
	// retry an interface it failed to open before.
	if err := c.transactAndWait(ctx, root, ops); err != nil {
		return 0, err
	}
	ofport, err := c.waitOFPort(ctx, cfg.Name)
	if err != nil {
		return 0, err
	}
	klog.InfoS("Updated OVS port", "bridge", bridge, "port", cfg.Name, "type", cfg.Type, "ofport", ofport)
	return ofport, nil
}

// createPortOps inserts the port and its interface and attaches the port to br.
func (c *Client) createPortOps(br *vswitchd.Bridge, cfg PortConfig) ([]libovsdb.Operation, error) {
	iface := &vswitchd.Interface{
		UUID:          "newiface",
		Name:          cfg.Name,
		Type:          string(cfg.Type),
		Options:       cfg.options(nil),
		OfportRequest: cfg.ofportRequest(),
		ExternalIDs:   maps.Clone(cfg.ExternalIDs),
	}
	port := &vswitchd.Port{
		UUID:        "newport",
		Name:        cfg.Name,
		Interfaces:  []string{iface.UUID},
		ExternalIDs: maps.Clone(cfg.ExternalIDs),
	}
	ops, err := c.ovs.Create(iface, port)
	if err != nil {
		return nil, fmt.Errorf("building insert: %w", err)
	}
	attach, err := c.ovs.Where(br).Mutate(br, model.Mutation{
		Field: &br.Ports, Mutator: libovsdb.MutateOperationInsert, Value: []string{port.UUID},
	})
	if err != nil {
		return nil, fmt.Errorf("building bridge ports update: %w", err)
	}
	ops = append([]libovsdb.Operation{assertExists(vswitchd.BridgeTable, br.UUID)}, ops...)
	return append(ops, attach...), nil
}

// updatePortOps returns what it takes to bring the existing port and its interface in line with
// cfg; none when they already are.
func (c *Client) updatePortOps(port *vswitchd.Port, iface *vswitchd.Interface, cfg PortConfig) ([]libovsdb.Operation, error) {
	var ops []libovsdb.Operation
	var fields []interface{}
	if iface.Type != string(cfg.Type) && !(iface.Type == "system" && cfg.Type == PortTypeSystem) {
		iface.Type = string(cfg.Type)
		fields = append(fields, &iface.Type)
	}
	if opts := cfg.options(iface.Options); !maps.Equal(opts, iface.Options) {
		iface.Options = opts
		fields = append(fields, &iface.Options)
	}
	if want := cfg.ofportRequest(); !equalIntPtr(want, iface.OfportRequest) {
		iface.OfportRequest = want
		fields = append(fields, &iface.OfportRequest)
	}
	if len(fields) > 0 {
		update, err := c.ovs.Where(&vswitchd.Interface{UUID: iface.UUID}).Update(iface, fields...)
		if err != nil {
			return nil, fmt.Errorf("building interface update: %w", err)
		}
		ops = append(ops, assertExists(vswitchd.InterfaceTable, iface.UUID))
		ops = append(ops, update...)
	}
	if !containsAll(iface.ExternalIDs, cfg.ExternalIDs) {
		merge, err := c.mergeExternalIDsOps(iface, &iface.ExternalIDs, iface.UUID, vswitchd.InterfaceTable, cfg.ExternalIDs)
		if err != nil {
			return nil, err
		}
		ops = append(ops, merge...)
	}
	if !containsAll(port.ExternalIDs, cfg.ExternalIDs) {
		merge, err := c.mergeExternalIDsOps(port, &port.ExternalIDs, port.UUID, vswitchd.PortTable, cfg.ExternalIDs)
		if err != nil {
			return nil, err
		}
		ops = append(ops, merge...)
	}
	return ops, nil
}

// mergeExternalIDsOps sets the keys of ids in the external_ids column field of the row m (table
// table, UUID id), keeping its other keys.
func (c *Client) mergeExternalIDsOps(m model.Model, field *map[string]string, id, table string, ids map[string]string) ([]libovsdb.Operation, error) {
	ops, err := c.ovs.Where(m).Mutate(m,
		model.Mutation{Field: field, Mutator: libovsdb.MutateOperationDelete, Value: slices.Sorted(maps.Keys(ids))},
		model.Mutation{Field: field, Mutator: libovsdb.MutateOperationInsert, Value: maps.Clone(ids)})
	if err != nil {
		return nil, fmt.Errorf("building %s external_ids update: %w", table, err)
	}
	return append([]libovsdb.Operation{assertExists(table, id)}, ops...), nil
}

// portInterface returns the interface of port that has the port's name.
func (c *Client) portInterface(ctx context.Context, port *vswitchd.Port) (*vswitchd.Interface, error) {
	iface := &vswitchd.Interface{Name: port.Name}
	found, err := c.get(ctx, iface)
	if err != nil {
		return nil, fmt.Errorf("reading interface: %w", err)
	}
	if !found || !slices.Contains(port.Interfaces, iface.UUID) {
		// Possibly a port made by someone else, or the cache is mid-update.
		return nil, stale("port exists but has no interface of the same name")
	}
	return iface, nil
}

// bridgeOfPort returns the name of the bridge that holds the port with UUID portUUID, or ""
// when none does.
func (c *Client) bridgeOfPort(ctx context.Context, portUUID string) (string, error) {
	var bridges []vswitchd.Bridge
	if err := c.ovs.List(ctx, &bridges); err != nil {
		return "", fmt.Errorf("listing bridges: %w", err)
	}
	for _, br := range bridges {
		if slices.Contains(br.Ports, portUUID) {
			return br.Name, nil
		}
	}
	return "", nil
}

// waitOFPort waits until the interface name has an OpenFlow port number or an error.
func (c *Client) waitOFPort(ctx context.Context, name string) (int32, error) {
	var ofport int32
	err := c.waitFor(ctx, func() (bool, error) {
		iface := &vswitchd.Interface{Name: name}
		found, err := c.get(ctx, iface)
		if err != nil || !found {
			return false, err
		}
		if iface.Ofport != nil && *iface.Ofport > 0 {
			ofport = int32(*iface.Ofport)
			return true, nil
		}
		if iface.Error != nil {
			return false, fmt.Errorf("interface error: %s", *iface.Error)
		}
		return false, nil
	})
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return 0, fmt.Errorf("waiting for ovs-vswitchd to assign an OpenFlow port: %w", err)
	}
	return ofport, err
}

// DeletePort removes the port name from bridge; ovsdb-server then drops the port and its
// interface. It returns once ovs-vswitchd has released the interface. Deleting a port that does
// not exist is not an error; deleting one that is on another bridge is.
func (c *Client) DeletePort(ctx context.Context, bridge, name string) error {
	err := c.retryStale(ctx, func() error { return c.deletePortOnce(ctx, bridge, name) })
	if err != nil {
		return fmt.Errorf("deleting port %q from bridge %q: %w", name, bridge, err)
	}
	return nil
}

func (c *Client) deletePortOnce(ctx context.Context, bridge, name string) error {
	root, err := c.root(ctx)
	if err != nil {
		return err
	}
	port := &vswitchd.Port{Name: name}
	found, err := c.get(ctx, port)
	if err != nil {
		return fmt.Errorf("reading port: %w", err)
	}
	if !found {
		return nil
	}
	owner, err := c.bridgeOfPort(ctx, port.UUID)
	if err != nil {
		return err
	}
	if owner == "" {
		// Ports without a bridge are garbage-collected at once, so the cache is mid-update.
		return stale("port is on no bridge")
	}
	if owner != bridge {
		return fmt.Errorf("port is on bridge %q", owner)
	}
	br := &vswitchd.Bridge{Name: bridge}
	if found, err := c.get(ctx, br); err != nil || !found {
		return stale("bridge vanished from the cache (%v)", err)
	}
	detach, err := c.ovs.Where(&vswitchd.Bridge{UUID: br.UUID}).Mutate(br, model.Mutation{
		Field: &br.Ports, Mutator: libovsdb.MutateOperationDelete, Value: []string{port.UUID},
	})
	if err != nil {
		return fmt.Errorf("building bridge ports update: %w", err)
	}
	ops := []libovsdb.Operation{assertExists(vswitchd.BridgeTable, br.UUID), assertExists(vswitchd.PortTable, port.UUID)}
	if err := c.transactAndWait(ctx, root, append(ops, detach...)); err != nil {
		return err
	}
	klog.InfoS("Deleted OVS port", "bridge", bridge, "port", name)
	return nil
}

// GetOFPort returns the OpenFlow port number of the interface name.
func (c *Client) GetOFPort(ctx context.Context, name string) (int32, error) {
	iface := &vswitchd.Interface{Name: name}
	found, err := c.get(ctx, iface)
	switch {
	case err != nil:
		return 0, fmt.Errorf("reading OpenFlow port of interface %q: %w", name, err)
	case !found:
		return 0, fmt.Errorf("reading OpenFlow port of interface %q: interface not found", name)
	case iface.Ofport != nil && *iface.Ofport > 0:
		return int32(*iface.Ofport), nil
	case iface.Error != nil:
		return 0, fmt.Errorf("reading OpenFlow port of interface %q: interface error: %s", name, *iface.Error)
	}
	return 0, fmt.Errorf("reading OpenFlow port of interface %q: no OpenFlow port assigned yet", name)
}

func equalIntPtr(a, b *int) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// containsAll reports whether have holds every key of want with the same value.
func containsAll(have, want map[string]string) bool {
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			return false
		}
	}
	return true
}
