package nodenet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/stretchr/testify/require"
)

// fakeAnnounceOps records the proxy entries per device and every call.
type fakeAnnounceOps struct {
	entries  map[string]bool // "dev ip"
	calls    []string
	failAdd  map[netip.Addr]bool
	prepared []string
}

func newFakeOps() *fakeAnnounceOps {
	return &fakeAnnounceOps{entries: map[string]bool{}, failAdd: map[netip.Addr]bool{}}
}

func (f *fakeAnnounceOps) PrepareUplink(dev string, ipv6 bool) (func() error, error) {
	f.prepared = append(f.prepared, fmt.Sprintf("%s v6=%v", dev, ipv6))
	return func() error {
		f.calls = append(f.calls, fmt.Sprintf("restore %s v6=%v", dev, ipv6))
		return nil
	}, nil
}
func (f *fakeAnnounceOps) AddProxyNeighbor(dev string, ip netip.Addr) error {
	if f.failAdd[ip] {
		return errors.New("boom")
	}
	f.entries[dev+" "+ip.String()] = true
	return nil
}
func (f *fakeAnnounceOps) DeleteProxyNeighbor(dev string, ip netip.Addr) error {
	f.calls = append(f.calls, "del "+dev+" "+ip.String())
	delete(f.entries, dev+" "+ip.String())
	return nil
}
func (f *fakeAnnounceOps) Gratuitous(dev string, ip netip.Addr) error {
	f.calls = append(f.calls, "garp "+dev+" "+ip.String())
	return nil
}
func (f *fakeAnnounceOps) take() []string { c := f.calls; f.calls = nil; return c }

func TestAnnouncerSync(t *testing.T) {
	ops := newFakeOps()
	an := NewAnnouncer(ops, 2)
	v4, v4b, v6 := a("172.18.0.5"), a("172.18.0.6"), a("fd00:18::5")

	require.NoError(t, an.Sync("eth0", []netip.Addr{v4, v6}))
	require.Equal(t, map[string]bool{"eth0 172.18.0.5": true, "eth0 fd00:18::5": true}, ops.entries)
	require.Equal(t, []string{"eth0 v6=false", "eth0 v6=true"}, ops.prepared)
	require.Equal(t, []string{"garp eth0 172.18.0.5", "garp eth0 fd00:18::5"}, ops.take(), "announced at once")
	require.True(t, an.Pending())

	// The second sync repeats the announcement; the third has nothing left to repeat.
	require.NoError(t, an.Sync("eth0", []netip.Addr{v4, v6}))
	require.Equal(t, []string{"garp eth0 172.18.0.5", "garp eth0 fd00:18::5"}, ops.take())
	require.False(t, an.Pending())
	require.NoError(t, an.Sync("eth0", []netip.Addr{v4, v6}))
	require.Empty(t, ops.take())
	require.Len(t, ops.prepared, 2, "sysctls are set once per family")

	// A drifted entry is repaired without a new announcement.
	delete(ops.entries, "eth0 172.18.0.5")
	require.NoError(t, an.Sync("eth0", []netip.Addr{v4, v6}))
	require.True(t, ops.entries["eth0 172.18.0.5"])
	require.Empty(t, ops.take())

	// v6 moves away, v4b arrives.
	require.NoError(t, an.Sync("eth0", []netip.Addr{v4b, v4}))
	require.Equal(t, []string{"del eth0 fd00:18::5", "garp eth0 172.18.0.6"}, ops.take())
	require.Equal(t, []netip.Addr{v4, v4b}, an.Announced())

	// The uplink changes: everything is withdrawn from the old one, which gets its sysctls back
	// (both families were prepared there), and announced on the new one, prepared for IPv4.
	require.NoError(t, an.Sync("eth1", []netip.Addr{v4}))
	if diff := cmp.Diff([]string{"del eth0 172.18.0.5", "del eth0 172.18.0.6", "restore eth0 v6=false", "restore eth0 v6=true",
		"garp eth1 172.18.0.5"}, ops.take()); diff != "" {
		t.Fatalf("calls (-want +got):\n%s", diff)
	}
	require.Equal(t, map[string]bool{"eth1 172.18.0.5": true}, ops.entries)
	require.Equal(t, []string{"eth0 v6=false", "eth0 v6=true", "eth1 v6=false"}, ops.prepared)

	require.NoError(t, an.Withdraw())
	require.Empty(t, ops.entries)
	require.Empty(t, an.Announced())
	require.Equal(t, []string{"del eth1 172.18.0.5", "restore eth1 v6=false"}, ops.take(), "Withdraw restores the uplink")
	require.NoError(t, an.Withdraw())
	require.Empty(t, ops.take(), "restored once")
}

// TestAnnouncerRestoresAfterPartialPrepare checks that a preparation that failed after changing
// proxy_delay is still undone, with the value from before the first attempt.
func TestAnnouncerRestoresAfterPartialPrepare(t *testing.T) {
	var restored []string
	ops := &partialPrepareOps{fakeAnnounceOps: newFakeOps(), restored: &restored}
	an := NewAnnouncer(ops, 1)
	ip := a("172.18.0.9")
	require.ErrorContains(t, an.Sync("eth0", []netip.Addr{ip}), "forwarding: boom")
	require.NoError(t, an.Sync("eth0", []netip.Addr{ip}))
	require.NoError(t, an.Withdraw())
	require.Equal(t, []string{"attempt 1"}, restored)
}

type partialPrepareOps struct {
	*fakeAnnounceOps
	attempts int
	restored *[]string
}

func (o *partialPrepareOps) PrepareUplink(dev string, ipv6 bool) (func() error, error) {
	o.attempts++
	n := o.attempts
	restore := func() error { *o.restored = append(*o.restored, fmt.Sprintf("attempt %d", n)); return nil }
	if n == 1 {
		return restore, errors.New("forwarding: boom")
	}
	return restore, nil
}

func TestAnnouncerRetriesFailures(t *testing.T) {
	ops := newFakeOps()
	an := NewAnnouncer(ops, 1)
	ip := a("172.18.0.9")
	ops.failAdd[ip] = true
	err := an.Sync("eth0", []netip.Addr{ip})
	require.ErrorContains(t, err, "announcing 172.18.0.9 on eth0: boom")
	require.Empty(t, ops.take(), "no announcement without the entry")
	require.Empty(t, an.Announced())
	ops.failAdd[ip] = false
	require.NoError(t, an.Sync("eth0", []netip.Addr{ip}))
	require.Equal(t, []string{"garp eth0 172.18.0.9"}, ops.take())
}

func TestAnnouncerNoUplinkWithdraws(t *testing.T) {
	ops := newFakeOps()
	an := NewAnnouncer(ops, 1)
	require.NoError(t, an.Sync("eth0", []netip.Addr{a("172.18.0.9")}))
	require.NoError(t, an.Sync("", []netip.Addr{a("172.18.0.9")}))
	require.Empty(t, ops.entries)
}

func TestGratuitousFrame(t *testing.T) {
	mac := net.HardwareAddr{0x02, 0, 0, 0, 0, 0x11}
	frame, dst, err := GratuitousFrame(mac, a("172.18.0.5"))
	require.NoError(t, err)
	require.Equal(t, "ff:ff:ff:ff:ff:ff", dst.String())
	pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	arp, ok := pkt.Layer(layers.LayerTypeARP).(*layers.ARP)
	require.True(t, ok, "an ARP packet: %v", pkt)
	require.Equal(t, uint16(layers.ARPRequest), arp.Operation)
	require.Equal(t, []byte(mac), arp.SourceHwAddress)
	require.Equal(t, []byte{172, 18, 0, 5}, arp.SourceProtAddress)
	require.Equal(t, []byte{172, 18, 0, 5}, arp.DstProtAddress)

	frame, dst, err = GratuitousFrame(mac, a("fd00:18::5"))
	require.NoError(t, err)
	require.Equal(t, "33:33:00:00:00:01", dst.String())
	pkt = gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	require.Nil(t, pkt.ErrorLayer())
	ip6 := pkt.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
	require.Equal(t, uint8(255), ip6.HopLimit)
	require.Equal(t, "ff02::1", ip6.DstIP.String())
	na, ok := pkt.Layer(layers.LayerTypeICMPv6NeighborAdvertisement).(*layers.ICMPv6NeighborAdvertisement)
	require.True(t, ok, "a neighbor advertisement: %v", pkt)
	require.True(t, na.Override())
	require.False(t, na.Solicited())
	require.Equal(t, "fd00:18::5", na.TargetAddress.String())
	require.Equal(t, layers.ICMPv6Options{{Type: layers.ICMPv6OptTargetAddress, Data: mac}}, na.Options)
	// The checksum is right: re-serialising with checksums computed gives the same bytes.
	icmp := pkt.Layer(layers.LayerTypeICMPv6).(*layers.ICMPv6)
	want := icmp.Checksum
	require.NoError(t, icmp.SetNetworkLayerForChecksum(ip6))
	buf := gopacket.NewSerializeBuffer()
	require.NoError(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{ComputeChecksums: true}, icmp, gopacket.Payload(icmp.Payload)))
	require.Equal(t, want, uint16(buf.Bytes()[2])<<8|uint16(buf.Bytes()[3]))
}

// TestAnnouncerRefresh: with a refresh interval, every announced address gets one more
// gratuitous announcement each interval after its last one; a withdrawn address gets none.
func TestAnnouncerRefresh(t *testing.T) {
	ops := newFakeOps()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	an := NewAnnouncer(ops, 1).RefreshEvery(10*time.Second, func() time.Time { return now })
	v4, v6 := a("172.18.0.5"), a("fd00:18::5")
	require.NoError(t, an.Sync("eth0", []netip.Addr{v4, v6}))
	require.Equal(t, []string{"garp eth0 172.18.0.5", "garp eth0 fd00:18::5"}, ops.take(), "announced at once")
	now = now.Add(9 * time.Second)
	require.NoError(t, an.Sync("eth0", []netip.Addr{v4, v6}))
	require.Empty(t, ops.take(), "not yet")
	now = now.Add(time.Second)
	require.NoError(t, an.Sync("eth0", []netip.Addr{v4}))
	require.Equal(t, []string{"del eth0 fd00:18::5", "garp eth0 172.18.0.5"}, ops.take(), "10 s after the last one; fd00:18::5 was withdrawn")
	now = now.Add(5 * time.Second)
	require.NoError(t, an.Sync("eth0", []netip.Addr{v4}))
	require.Empty(t, ops.take())
	now = now.Add(5 * time.Second)
	require.NoError(t, an.Sync("eth0", []netip.Addr{v4}))
	require.Equal(t, []string{"garp eth0 172.18.0.5"}, ops.take())
}

// gratuitousFrameGopacket is GratuitousFrame as it was written on gopacket, the reference the
// frames are compared with byte for byte.
func gratuitousFrameGopacket(mac net.HardwareAddr, ip netip.Addr) ([]byte, error) {
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if ip.Is4() {
		eth := &layers.Ethernet{SrcMAC: mac, DstMAC: net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, EthernetType: layers.EthernetTypeARP}
		arp := &layers.ARP{
			AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
			Operation: layers.ARPRequest, SourceHwAddress: mac, SourceProtAddress: ip.AsSlice(),
			DstHwAddress: make([]byte, 6), DstProtAddress: ip.AsSlice(),
		}
		err := gopacket.SerializeLayers(buf, opts, eth, arp)
		return buf.Bytes(), err
	}
	eth := &layers.Ethernet{SrcMAC: mac, DstMAC: net.HardwareAddr{0x33, 0x33, 0, 0, 0, 1}, EthernetType: layers.EthernetTypeIPv6}
	ip6 := &layers.IPv6{Version: 6, HopLimit: 255, NextHeader: layers.IPProtocolICMPv6,
		SrcIP: ip.AsSlice(), DstIP: netip.MustParseAddr("ff02::1").AsSlice()}
	icmp := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(layers.ICMPv6TypeNeighborAdvertisement, 0)}
	if err := icmp.SetNetworkLayerForChecksum(ip6); err != nil {
		return nil, err
	}
	na := &layers.ICMPv6NeighborAdvertisement{Flags: 0x20, TargetAddress: ip.AsSlice(),
		Options: layers.ICMPv6Options{{Type: layers.ICMPv6OptTargetAddress, Data: mac}}}
	err := gopacket.SerializeLayers(buf, opts, eth, ip6, icmp, na)
	return buf.Bytes(), err
}

func TestGratuitousFrameMatchesReference(t *testing.T) {
	for _, mac := range []net.HardwareAddr{{0x02, 0, 0, 0, 0, 0x11}, {0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54}} {
		for _, ip := range []string{"172.18.0.5", "10.0.0.1", "255.255.255.254", "fd00:18::5", "2001:db8::ffff:1", "fe80::1", "::ffff:10.1.2.3"} {
			want, err := gratuitousFrameGopacket(mac, a(ip))
			require.NoError(t, err)
			got, _, err := GratuitousFrame(mac, a(ip))
			require.NoError(t, err)
			require.Equal(t, want, got, "%s at %s", ip, mac)
		}
	}
	_, _, err := GratuitousFrame(net.HardwareAddr{1, 2, 3}, a("10.0.0.1"))
	require.Error(t, err, "a MAC address of 3 bytes")
	_, _, err = GratuitousFrame(net.HardwareAddr{2, 0, 0, 0, 0, 1}, netip.Addr{})
	require.Error(t, err, "the zero Addr")
}
