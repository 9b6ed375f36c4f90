package nodenet

// This file is the node side of VIP-mode LoadBalancer addresses on bare metal (in the style of
// MetalLB L2 and Antrea's ServiceExternalIP): the one node antrea-controller picked for an
// address makes its host answer ARP (IPv4) and NDP (IPv6) for it on the uplink, and announces
// it with a gratuitous ARP or an unsolicited Neighbor Advertisement when it starts doing so.
//
// The host answers through proxy neighbour entries (NTF_PROXY, what `ip neigh add proxy`
// creates): Linux replies to an ARP request or a Neighbor Solicitation for a proxied address
// received on the uplink when forwarding is on for it, the route to the address leaves through
// another interface (the gateway: nodenet routes programmed LoadBalancer IPs into OVS), and,
// for IPv6, proxy_ndp is on. proxy_delay is set to 0 on the uplink so that the answer is not
// delayed by up to 0.8 s; its previous value is restored when the Announcer stops (Withdraw) or
// moves to another uplink.

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"k8s.io/klog/v2"
)

// DefaultGratuitousRepeats is how many announcements an address gets when it starts being
// announced: one at once and the rest on the following syncs, in case one is lost.
const DefaultGratuitousRepeats = 3

// AnnounceOps is what the Announcer needs from the host; HostAnnounceOps is the real one.
type AnnounceOps interface {
	// PrepareUplink makes the host answer for proxy neighbours on dev (sysctls) for the family.
	// restore, when not nil, undoes what must not outlive the announcements (proxy_delay); it
	// may be returned with an error, when part of the preparation was done.
	PrepareUplink(dev string, ipv6 bool) (restore func() error, err error)
	// AddProxyNeighbor makes the host answer ARP/NDP for ip on dev; idempotent.
	AddProxyNeighbor(dev string, ip netip.Addr) error
	// DeleteProxyNeighbor undoes AddProxyNeighbor; an entry that is not there is not an error.
	DeleteProxyNeighbor(dev string, ip netip.Addr) error
	// Gratuitous sends a gratuitous ARP (IPv4) or an unsolicited NA (IPv6) for ip out of dev.
	Gratuitous(dev string, ip netip.Addr) error
}

// Announcer keeps the host answering for the addresses this node announces. It is not safe for
// concurrent use; one goroutine calls Sync.
type Announcer struct {
	ops     AnnounceOps
	repeats int

	uplink    string
	announced map[netip.Addr]bool
	// pending counts the gratuitous announcements still to send per address.
	pending  map[netip.Addr]int
	prepared map[bool]bool // per family (true = IPv6) on uplink
	// restore undoes PrepareUplink on uplink, per family.
	restore map[bool]func() error
	// refresh, when positive, repeats one gratuitous announcement per address at that
	// interval (switches and routers that forgot the address learn it again); now is the clock
	// and lastSent when each address was last announced.
	refresh  time.Duration
	now      func() time.Time
	lastSent map[netip.Addr]time.Time
}

// NewAnnouncer returns an Announcer over ops sending repeats announcements per new address
// (0 means DefaultGratuitousRepeats).
func NewAnnouncer(ops AnnounceOps, repeats int) *Announcer {
	if repeats <= 0 {
		repeats = DefaultGratuitousRepeats
	}
	return &Announcer{ops: ops, repeats: repeats, announced: map[netip.Addr]bool{}, pending: map[netip.Addr]int{},
		prepared: map[bool]bool{}, restore: map[bool]func() error{}}
}

// RefreshEvery makes Sync repeat a gratuitous announcement of every announced address each
// interval (0 turns it off), timed by now.
func (a *Announcer) RefreshEvery(interval time.Duration, now func() time.Time) *Announcer {
	a.refresh, a.now, a.lastSent = interval, now, map[netip.Addr]time.Time{}
	return a
}

// Announced returns the addresses currently announced, sorted.
func (a *Announcer) Announced() []netip.Addr {
	return slices.SortedFunc(maps.Keys(a.announced), netip.Addr.Compare)
}

// Sync makes ips (announced on uplink) the announced set: new addresses get a proxy neighbour
// entry and a gratuitous announcement, addresses no longer wanted (or all of them, when the
// uplink changed or is "") lose their entry. Existing entries are re-applied, repairing drift,
// and pending repeat announcements are sent. Failures are retried by the next Sync.
func (a *Announcer) Sync(uplink string, ips []netip.Addr) error {
	var errs []error
	want := map[netip.Addr]bool{}
	for _, ip := range ips {
		if ip.IsValid() {
			want[ip.Unmap()] = true
		}
	}
	if uplink != a.uplink {
		errs = append(errs, a.withdrawAll())
		a.uplink = uplink
	}
	if uplink == "" {
		return errors.Join(errs...)
	}
	for _, ip := range slices.SortedFunc(maps.Keys(a.announced), netip.Addr.Compare) {
		if want[ip] {
			continue
		}
		if err := a.ops.DeleteProxyNeighbor(uplink, ip); err != nil {
			errs = append(errs, fmt.Errorf("withdrawing %s from %s: %w", ip, uplink, err))
			continue
		}
		delete(a.announced, ip)
		delete(a.pending, ip)
		delete(a.lastSent, ip)
		klog.InfoS("Stopped announcing LoadBalancer IP", "ip", ip, "uplink", uplink)
	}
	for _, ip := range slices.SortedFunc(maps.Keys(want), netip.Addr.Compare) {
		v6 := ip.Is6()
		if !a.prepared[v6] {
			restore, err := a.ops.PrepareUplink(uplink, v6)
			if restore != nil && a.restore[v6] == nil {
				// Only the first preparation saw the values from before the Announcer.
				a.restore[v6] = restore
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("preparing %s to answer for %s: %w", uplink, ip, err))
				continue
			}
			a.prepared[v6] = true
		}
		if err := a.ops.AddProxyNeighbor(uplink, ip); err != nil {
			errs = append(errs, fmt.Errorf("announcing %s on %s: %w", ip, uplink, err))
			continue
		}
		if !a.announced[ip] {
			a.announced[ip] = true
			a.pending[ip] = a.repeats
			klog.InfoS("Announcing LoadBalancer IP", "ip", ip, "uplink", uplink)
		}
	}
	if a.refresh > 0 {
		now := a.now()
		for ip := range a.announced {
			if _, owed := a.pending[ip]; !owed && now.Sub(a.lastSent[ip]) >= a.refresh {
				a.pending[ip] = 1
			}
		}
	}
	for _, ip := range slices.SortedFunc(maps.Keys(a.pending), netip.Addr.Compare) {
		if a.refresh > 0 {
			a.lastSent[ip] = a.now()
		}
		if err := a.ops.Gratuitous(uplink, ip); err != nil {
			errs = append(errs, fmt.Errorf("sending a gratuitous announcement of %s on %s: %w", ip, uplink, err))
			continue
		}
		if a.pending[ip]--; a.pending[ip] <= 0 {
			delete(a.pending, ip)
		}
	}
	return errors.Join(errs...)
}

// Pending reports whether repeat announcements remain to be sent by later Syncs.
func (a *Announcer) Pending() bool { return len(a.pending) > 0 }

// Withdraw stops announcing every address and restores the uplink's proxy_delay.
func (a *Announcer) Withdraw() error { return a.withdrawAll() }

// withdrawAll deletes every proxy neighbour entry of a.uplink and undoes PrepareUplink there
// (an entry left by a failed deletion is then answered for after proxy_delay, not at once).
func (a *Announcer) withdrawAll() error {
	var errs []error
	for _, ip := range slices.SortedFunc(maps.Keys(a.announced), netip.Addr.Compare) {
		if err := a.ops.DeleteProxyNeighbor(a.uplink, ip); err != nil {
			errs = append(errs, fmt.Errorf("withdrawing %s from %s: %w", ip, a.uplink, err))
			continue
		}
		delete(a.announced, ip)
		klog.InfoS("Stopped announcing LoadBalancer IP", "ip", ip, "uplink", a.uplink)
	}
	clear(a.pending)
	for _, v6 := range []bool{false, true} {
		if r := a.restore[v6]; r != nil {
			if err := r(); err != nil {
				errs = append(errs, fmt.Errorf("restoring %s: %w", a.uplink, err))
			}
		}
	}
	clear(a.restore)
	clear(a.prepared)
	return errors.Join(errs...)
}

// HostAnnounceOps are the AnnounceOps of a host network namespace: netlink proxy neighbours,
// sysctls under /proc/sys/net, and an AF_PACKET socket for the announcements.
type HostAnnounceOps struct {
	Host Host
}

var _ AnnounceOps = HostAnnounceOps{}

// PrepareUplink turns forwarding on for dev, proxy_ndp for IPv6, and sets proxy_delay to 0; the
// restore it returns puts the previous proxy_delay back (forwarding stays on: the node data
// path needs it; proxy_ndp only matters with proxy entries, which are gone by then).
func (o HostAnnounceOps) PrepareUplink(dev string, ipv6 bool) (func() error, error) {
	fam := "ipv4"
	if ipv6 {
		fam = "ipv6"
	}
	delayFile := "/proc/sys/net/" + fam + "/neigh/" + dev + "/proxy_delay"
	settings := [][2]string{
		{"/proc/sys/net/" + fam + "/conf/" + dev + "/forwarding", "1"},
		{delayFile, "0"},
	}
	if ipv6 {
		settings = append(settings, [2]string{"/proc/sys/net/ipv6/conf/" + dev + "/proxy_ndp", "1"})
	}
	var restore func() error
	err := o.Host.do(func() error {
		var errs []error
		if old, err := os.ReadFile(delayFile); err != nil {
			errs = append(errs, fmt.Errorf("reading %s: %w", delayFile, err))
		} else if prev := strings.TrimSpace(string(old)); prev != "0" {
			restore = func() error {
				return o.Host.do(func() error {
					if err := writeSysctl(delayFile, prev); err != nil {
						return fmt.Errorf("setting %s back to %s: %w", delayFile, prev, err)
					}
					klog.InfoS("Restored the uplink's proxy_delay", "file", delayFile, "value", prev)
					return nil
				})
			}
		}
		for _, s := range settings {
			if s[0] == delayFile && len(errs) > 0 {
				continue // not knowing the previous value, leave it alone
			}
			if err := os.WriteFile(s[0], []byte(s[1]+"\n"), 0o644); err != nil {
				errs = append(errs, fmt.Errorf("setting %s to %s: %w", s[0], s[1], err))
			}
		}
		return errors.Join(errs...)
	})
	return restore, err
}

// UplinkOf returns the name of the interface of the host holding ip, or an error naming ip. It
// reads the host's addresses of ip's family in one dump and then the one link holding ip (the
// announcer asks after every change and every 10 s: one request per link would grow with the
// pods' interfaces).
func (h Host) UplinkOf(ip netip.Addr) (string, error) {
	nl, err := h.handle()
	if err != nil {
		return "", err
	}
	defer nl.Close()
	ip = ip.Unmap()
	family := netlink.FAMILY_V4
	if ip.Is6() {
		family = netlink.FAMILY_V6
	}
	addrs, err := nl.AddrList(nil, family)
	if err != nil {
		return "", fmt.Errorf("listing addresses: %w", err)
	}
	for _, ad := range addrs {
		if got, ok := netip.AddrFromSlice(ad.IP); !ok || got.Unmap() != ip {
			continue
		}
		l, err := nl.LinkByIndex(ad.LinkIndex)
		if err != nil {
			return "", fmt.Errorf("finding the interface holding %s (index %d): %w", ip, ad.LinkIndex, err)
		}
		return l.Attrs().Name, nil
	}
	return "", fmt.Errorf("no interface holds %s", ip)
}

// linkMAC returns the index and MAC address of dev.
func (h Host) linkMAC(dev string) (int, net.HardwareAddr, error) {
	nl, err := h.handle()
	if err != nil {
		return 0, nil, err
	}
	defer nl.Close()
	l, err := nl.LinkByName(dev)
	if err != nil {
		return 0, nil, fmt.Errorf("finding interface %s: %w", dev, err)
	}
	return l.Attrs().Index, l.Attrs().HardwareAddr, nil
}
