package nodenet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/antrea-proxy/antrea-proxy/pkg/netutil/packet"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// AddProxyNeighbor adds (or keeps) the proxy neighbour entry of ip on dev.
func (o HostAnnounceOps) AddProxyNeighbor(dev string, ip netip.Addr) error {
	return o.proxyNeighbor(dev, ip, true)
}

// DeleteProxyNeighbor removes the proxy neighbour entry of ip on dev, if any.
func (o HostAnnounceOps) DeleteProxyNeighbor(dev string, ip netip.Addr) error {
	return o.proxyNeighbor(dev, ip, false)
}

func (o HostAnnounceOps) proxyNeighbor(dev string, ip netip.Addr, add bool) error {
	nl, err := o.Host.handle()
	if err != nil {
		return err
	}
	defer nl.Close()
	l, err := nl.LinkByName(dev)
	if err != nil {
		return fmt.Errorf("finding interface %s: %w", dev, err)
	}
	fam := netlink.FAMILY_V4
	if ip.Is6() {
		fam = netlink.FAMILY_V6
	}
	n := &netlink.Neigh{LinkIndex: l.Attrs().Index, Family: fam, Flags: netlink.NTF_PROXY, IP: net.IP(ip.AsSlice())}
	if add {
		if err := nl.NeighSet(n); err != nil {
			return fmt.Errorf("adding proxy neighbour %s on %s: %w", ip, dev, err)
		}
		return nil
	}
	if err := nl.NeighDel(n); err != nil && !isNotFound(err) {
		return fmt.Errorf("deleting proxy neighbour %s on %s: %w", ip, dev, err)
	}
	return nil
}

func isNotFound(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH)
}

// Gratuitous sends a gratuitous ARP request (IPv4) or an unsolicited Neighbor Advertisement
// with the override flag (IPv6) for ip with dev's MAC address, out of dev.
func (o HostAnnounceOps) Gratuitous(dev string, ip netip.Addr) error {
	ifindex, mac, err := o.Host.linkMAC(dev)
	if err != nil {
		return err
	}
	frame, dst, err := GratuitousFrame(mac, ip)
	if err != nil {
		return err
	}
	return o.Host.do(func() error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("opening a packet socket: %w", err)
		}
		defer unix.Close(fd)
		sa := &unix.SockaddrLinklayer{Ifindex: ifindex, Halen: 6}
		copy(sa.Addr[:], dst)
		if err := unix.Sendto(fd, frame, 0, sa); err != nil {
			return fmt.Errorf("sending on %s: %w", dev, err)
		}
		return nil
	})
}

// GratuitousFrame builds the Ethernet frame announcing that ip is at mac, and returns it with
// its destination MAC: a broadcast ARP request whose sender and target are ip (IPv4), or an
// unsolicited Neighbor Advertisement (override set, solicited unset) from ip to ff02::1 with a
// target link-layer address option (IPv6).
func GratuitousFrame(mac net.HardwareAddr, ip netip.Addr) ([]byte, net.HardwareAddr, error) {
	if len(mac) != 6 {
		return nil, nil, fmt.Errorf("announcing %s: MAC address %q is not 6 bytes", ip, mac)
	}
	if !ip.IsValid() {
		return nil, nil, errors.New("announcing an invalid IP address")
	}
	src := [6]byte(mac)
	if ip.Is4() {
		dst := net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
		b := make([]byte, 0, packet.MinFrameLen)
		b = packet.AppendEthernet(b, packet.Ethernet{Dst: [6]byte(dst), Src: src, EtherType: packet.EtherTypeARP})
		b = packet.AppendARP(b, packet.ARP{Operation: packet.ARPRequest, SenderMAC: src, SenderIP: ip.As4(), TargetIP: ip.As4()})
		return packet.AppendPadding(b), dst, nil
	}
	allNodes := netip.MustParseAddr("ff02::1")
	dst := net.HardwareAddr{0x33, 0x33, 0, 0, 0, 1}
	ip6 := packet.IPv6{NextHeader: packet.ProtoICMPv6, HopLimit: 255, Src: ip.As16(), Dst: allNodes.As16()}
	b := make([]byte, 0, packet.EthernetHeaderLen+packet.IPv6HeaderLen+packet.NeighborAdvertisementLen)
	b = packet.AppendEthernet(b, packet.Ethernet{Dst: [6]byte(dst), Src: src, EtherType: packet.EtherTypeIPv6})
	b = packet.AppendIPv6(b, ip6, packet.NeighborAdvertisementLen)
	start := len(b)
	b = packet.AppendNeighborAdvertisement(b, packet.NeighborAdvertisement{Flags: packet.NAOverride, Target: ip.As16(), TargetLL: src})
	packet.SetICMPv6Checksum(b[start:], ip6.Src[:], ip6.Dst[:])
	return b, dst, nil
}
