package nodenet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
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
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if ip.Is4() {
		dst := net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
		eth := &layers.Ethernet{SrcMAC: mac, DstMAC: dst, EthernetType: layers.EthernetTypeARP}
		arp := &layers.ARP{
			AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
			Operation: layers.ARPRequest, SourceHwAddress: mac, SourceProtAddress: ip.AsSlice(),
			DstHwAddress: make([]byte, 6), DstProtAddress: ip.AsSlice(),
		}
		if err := gopacket.SerializeLayers(buf, opts, eth, arp); err != nil {
			return nil, nil, fmt.Errorf("building the gratuitous ARP for %s: %w", ip, err)
		}
		return buf.Bytes(), dst, nil
	}
	allNodes := netip.MustParseAddr("ff02::1")
	dst := net.HardwareAddr{0x33, 0x33, 0, 0, 0, 1}
	eth := &layers.Ethernet{SrcMAC: mac, DstMAC: dst, EthernetType: layers.EthernetTypeIPv6}
	ip6 := &layers.IPv6{Version: 6, HopLimit: 255, NextHeader: layers.IPProtocolICMPv6,
		SrcIP: ip.AsSlice(), DstIP: allNodes.AsSlice()}
	icmp := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(layers.ICMPv6TypeNeighborAdvertisement, 0)}
	if err := icmp.SetNetworkLayerForChecksum(ip6); err != nil {
		return nil, nil, err
	}
	na := &layers.ICMPv6NeighborAdvertisement{Flags: 0x20, TargetAddress: ip.AsSlice(),
		Options: layers.ICMPv6Options{{Type: layers.ICMPv6OptTargetAddress, Data: mac}}}
	if err := gopacket.SerializeLayers(buf, opts, eth, ip6, icmp, na); err != nil {
		return nil, nil, fmt.Errorf("building the unsolicited NA for %s: %w", ip, err)
	}
	return buf.Bytes(), dst, nil
}
