package nodenet

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/netutil"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/ovsdb"
)

// Ports creates OVS ports (implemented by *ovsdb.Client).
type Ports interface {
	EnsurePort(ctx context.Context, bridge string, cfg ovsdb.PortConfig) (int32, error)
}

// External IDs of the gateway port.
const (
	ExtIDOwner      = "antrea-owner"
	ExtIDType       = "antrea-type"
	ownerAgent      = "antrea-agent"
	portTypeGateway = "gateway"
)

// GatewayConfig is the desired host gateway.
type GatewayConfig struct {
	// Name of the interface and of its OVS port, e.g. antrea-gw0.
	Name string
	// Bridge is the OVS bridge the gateway is a port of.
	Bridge string
	// MAC is set on the interface; see GatewayMAC.
	MAC net.HardwareAddr
	// MTU of the interface; 0 keeps what OVS gave it.
	MTU int
	// DisableTXChecksumOffload is needed with OVS's userspace (netdev) datapath, which does not
	// complete partial checksums of packets the kernel sends into the gateway.
	DisableTXChecksumOffload bool
}

// Gateway is a set-up host gateway.
type Gateway struct {
	Name   string
	OFPort uint32
	MAC    net.HardwareAddr
}

// GatewayMAC derives a stable, locally administered unicast MAC from seed (the Node name): the
// gateway keeps its MAC across agent restarts and even when OVS re-creates the interface, so
// pods' neighbour entries for their gateway stay valid.
func GatewayMAC(seed string) net.HardwareAddr {
	sum := sha256.Sum256([]byte("antrea-gw/" + seed))
	mac := net.HardwareAddr(slices.Clone(sum[:6]))
	mac[0] = mac[0]&^0x01 | 0x02
	return mac
}

// EnsureGateway creates the gateway's internal port on the bridge (or keeps the existing one),
// then sets its MAC, MTU and checksum offload and brings it up. It is idempotent.
func (h Host) EnsureGateway(ctx context.Context, ports Ports, cfg GatewayConfig) (*Gateway, error) {
	if cfg.Name == "" || cfg.Bridge == "" || len(cfg.MAC) != 6 {
		return nil, fmt.Errorf("gateway config %+v: name, bridge and a 6-byte MAC are required", cfg)
	}
	ofport, err := ports.EnsurePort(ctx, cfg.Bridge, ovsdb.PortConfig{Name: cfg.Name, Type: ovsdb.PortTypeInternal,
		ExternalIDs: map[string]string{ExtIDOwner: ownerAgent, ExtIDType: portTypeGateway}})
	if err != nil {
		return nil, fmt.Errorf("gateway %s: %w", cfg.Name, err)
	}
	nl, err := h.handle()
	if err != nil {
		return nil, err
	}
	defer nl.Close()
	link, err := nl.LinkByName(cfg.Name)
	if err != nil {
		return nil, fmt.Errorf("gateway %s: looking up the interface OVS created: %w", cfg.Name, err)
	}
	if !slices.Equal(link.Attrs().HardwareAddr, cfg.MAC) {
		if err := nl.LinkSetHardwareAddr(link, cfg.MAC); err != nil {
			return nil, fmt.Errorf("gateway %s: setting MAC %s: %w", cfg.Name, cfg.MAC, err)
		}
	}
	if cfg.MTU > 0 && link.Attrs().MTU != cfg.MTU {
		if err := nl.LinkSetMTU(link, cfg.MTU); err != nil {
			return nil, fmt.Errorf("gateway %s: setting MTU %d: %w", cfg.Name, cfg.MTU, err)
		}
	}
	if cfg.DisableTXChecksumOffload {
		if err := h.do(func() error { return netutil.DisableTXChecksum(netns.None(), cfg.Name) }); err != nil {
			return nil, fmt.Errorf("gateway %s: %w", cfg.Name, err)
		}
	}
	if err := nl.LinkSetUp(link); err != nil {
		return nil, fmt.Errorf("gateway %s: setting it up: %w", cfg.Name, err)
	}
	klog.InfoS("Host gateway ready", "gateway", cfg.Name, "ofport", ofport, "mac", cfg.MAC)
	return &Gateway{Name: cfg.Name, OFPort: uint32(ofport), MAC: cfg.MAC}, nil
}

// GatewayAddresses returns the gateway address of each podCIDR: its first address, with the
// podCIDR's prefix length.
func GatewayAddresses(podCIDRs []netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	for _, c := range podCIDRs {
		c = c.Masked()
		out = append(out, netip.PrefixFrom(c.Addr().Next(), c.Bits()))
	}
	return out
}

// SetGatewayAddresses makes addrs the only global addresses of the gateway interface name:
// missing ones are added (IPv6 without duplicate address detection), others are removed, e.g.
// those of a podCIDR the Node no longer has.
func (h Host) SetGatewayAddresses(name string, addrs []netip.Prefix) error {
	nl, err := h.handle()
	if err != nil {
		return err
	}
	defer nl.Close()
	link, err := nl.LinkByName(name)
	if err != nil {
		return fmt.Errorf("gateway %s: %w", name, err)
	}
	have, err := nl.AddrList(link, netlink.FAMILY_ALL)
	if err != nil {
		return fmt.Errorf("gateway %s: listing addresses: %w", name, err)
	}
	want := map[netip.Prefix]bool{}
	for _, a := range addrs {
		want[a] = true
	}
	var errs []error
	for _, a := range have {
		p, ok := prefixOf(a.IPNet)
		if !ok || !p.Addr().IsGlobalUnicast() || want[p] {
			continue
		}
		if err := nl.AddrDel(link, &a); err != nil {
			errs = append(errs, fmt.Errorf("gateway %s: removing stale address %s: %w", name, p, err))
		} else {
			klog.InfoS("Removed stale gateway address", "gateway", name, "address", p)
		}
	}
	for _, a := range addrs {
		addr := &netlink.Addr{IPNet: ipNet(a)}
		if a.Addr().Is6() {
			addr.Flags = unix.IFA_F_NODAD
		}
		if err := nl.AddrReplace(link, addr); err != nil {
			errs = append(errs, fmt.Errorf("gateway %s: adding address %s: %w", name, a, err))
		}
	}
	return errors.Join(errs...)
}

func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	ip, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(ip.Unmap(), ones), true
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// RestoreGateway re-applies the host side of the gateway after ovs-vswitchd re-created its
// interface (with the userspace datapath a restarted vswitchd creates a new tap device, which
// has none of the addresses, MAC, MTU or TX checksum setting of the old one, and the routes and
// neighbour entries through it are gone with it): EnsureGateway with cfg, then
// SetGatewayAddresses with addrs. It is idempotent and also right when nothing was lost. The
// caller re-applies routes and neighbours with Reconciler.Resync afterwards, and must compare
// the returned OFPort with the one its flows use.
func (h Host) RestoreGateway(ctx context.Context, ports Ports, cfg GatewayConfig, addrs []netip.Prefix) (*Gateway, error) {
	gw, err := h.EnsureGateway(ctx, ports, cfg)
	if err != nil {
		return nil, err
	}
	if err := h.SetGatewayAddresses(cfg.Name, addrs); err != nil {
		return nil, err
	}
	return gw, nil
}
