// Package ipam hands out pod addresses from the Node's podCIDRs, host-local style: every
// reserved address is a file in a state directory, named after the address and holding the
// owner (container ID and interface). The state survives agent restarts, an address is never
// handed out twice, and reservations are created atomically (the file is written under a
// temporary name, then hard-linked into place, which fails if the address is already taken).
package ipam

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/antrea-proxy/antrea-proxy/pkg/cni/internal/atomicfile"
)

// ErrExhausted is returned (wrapped) when a subnet has no free address.
var ErrExhausted = errors.New("no free address")

// Owner is the container interface an address is reserved for.
type Owner struct {
	ContainerID string
	IfName      string
}

func (o Owner) String() string { return o.ContainerID + "/" + o.IfName }

func (o Owner) encode() []byte { return []byte(o.ContainerID + "\n" + o.IfName + "\n") }

func decodeOwner(b []byte) (Owner, bool) {
	f := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(f) != 2 || f[0] == "" || f[1] == "" {
		return Owner{}, false
	}
	return Owner{ContainerID: f[0], IfName: f[1]}, true
}

// Allocator reserves addresses in one or more subnets (at most one per family). It is safe for
// concurrent use; only one Allocator may use a directory at a time.
type Allocator struct {
	dir     string
	subnets []netip.Prefix
	mu      sync.Mutex
	// unsaved are reservations made while the disk was full, kept in memory until Flush
	// writes them (guarded by mu).
	unsaved map[netip.Addr]Owner
}

// Gateway returns the gateway address of subnet: its first address after the network address.
func Gateway(subnet netip.Prefix) netip.Addr { return subnet.Masked().Addr().Next() }

// New returns an allocator for subnets that keeps its state in dir (created if needed).
func New(dir string, subnets []netip.Prefix) (*Allocator, error) {
	if len(subnets) == 0 {
		return nil, errors.New("IPAM needs at least one subnet")
	}
	seen := map[bool]bool{}
	var norm []netip.Prefix
	for _, s := range subnets {
		if !s.IsValid() {
			return nil, fmt.Errorf("invalid subnet %v", s)
		}
		s = s.Masked()
		if seen[s.Addr().Is4()] {
			return nil, fmt.Errorf("subnet %v: only one subnet per IP family is supported", s)
		}
		seen[s.Addr().Is4()] = true
		if hostBits(s) < 2 {
			return nil, fmt.Errorf("subnet %v is too small for pods", s)
		}
		norm = append(norm, s)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating IPAM directory %s: %w", dir, err)
	}
	return &Allocator{dir: dir, subnets: norm, unsaved: map[netip.Addr]Owner{}}, nil
}

func hostBits(s netip.Prefix) int { return s.Addr().BitLen() - s.Bits() }

// Subnets returns the allocator's subnets.
func (a *Allocator) Subnets() []netip.Prefix { return append([]netip.Prefix(nil), a.subnets...) }

// Allocate reserves one address in each subnet for owner and returns them with the subnet's
// prefix length, in subnet order. An owner that already holds addresses gets the same ones back
// (ADD is idempotent). When one subnet is exhausted, nothing new is reserved.
func (a *Allocator) Allocate(owner Owner) ([]netip.Prefix, error) {
	if owner.ContainerID == "" || owner.IfName == "" || strings.ContainsAny(owner.ContainerID+owner.IfName, "\n/") {
		return nil, fmt.Errorf("invalid IPAM owner %q", owner)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	held, err := a.scan()
	if err != nil {
		return nil, err
	}
	var out, fresh []netip.Prefix
	for _, s := range a.subnets {
		ip, ok := ownedIn(held, owner, s)
		if !ok {
			ip, err = a.reserve(held, owner, s)
			if err != nil {
				for _, p := range fresh {
					_ = a.remove(p.Addr())
				}
				return nil, err
			}
			fresh = append(fresh, netip.PrefixFrom(ip, s.Bits()))
		}
		out = append(out, netip.PrefixFrom(ip, s.Bits()))
	}
	return out, nil
}

func ownedIn(held map[netip.Addr]Owner, owner Owner, s netip.Prefix) (netip.Addr, bool) {
	var best netip.Addr
	for ip, o := range held {
		if o == owner && s.Contains(ip) && (!best.IsValid() || ip.Less(best)) {
			best = ip
		}
	}
	return best, best.IsValid()
}

// Get returns the addresses reserved for owner, with their subnet's prefix length, in subnet
// order. Addresses outside the current subnets are not returned.
func (a *Allocator) Get(owner Owner) ([]netip.Prefix, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	held, err := a.scan()
	if err != nil {
		return nil, err
	}
	var out []netip.Prefix
	for _, s := range a.subnets {
		if ip, ok := ownedIn(held, owner, s); ok {
			out = append(out, netip.PrefixFrom(ip, s.Bits()))
		}
	}
	return out, nil
}

// Release frees every address reserved for owner, in any subnet. Releasing an owner that holds
// nothing is not an error.
func (a *Allocator) Release(owner Owner) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	held, err := a.scan()
	if err != nil {
		return err
	}
	for ip, o := range held {
		if o == owner {
			if err := a.remove(ip); err != nil {
				return err
			}
		}
	}
	return nil
}

// Owners returns every owner holding an address.
func (a *Allocator) Owners() (map[Owner][]netip.Addr, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	held, err := a.scan()
	if err != nil {
		return nil, err
	}
	out := map[Owner][]netip.Addr{}
	for ip, o := range held {
		out[o] = append(out[o], ip)
	}
	return out, nil
}

// scan reads every reservation in the directory.
func (a *Allocator) scan() (map[netip.Addr]Owner, error) {
	entries, err := os.ReadDir(a.dir)
	if err != nil {
		return nil, fmt.Errorf("reading IPAM directory %s: %w", a.dir, err)
	}
	held := map[netip.Addr]Owner{}
	for _, e := range entries {
		ip, err := netip.ParseAddr(e.Name())
		if err != nil || !e.Type().IsRegular() {
			continue // last-reserved markers, temporary files
		}
		data, err := os.ReadFile(filepath.Join(a.dir, e.Name()))
		if errors.Is(err, os.ErrNotExist) {
			continue // released meanwhile
		}
		o, ok := decodeOwner(data)
		if err != nil || !ok {
			// A reservation that cannot be read or decoded still keeps its address out of use.
			o = corruptOwner(ip)
		}
		held[ip] = o
	}
	for ip, o := range a.unsaved {
		held[ip] = o
	}
	return held, nil
}

// reserve finds a free address in s, starting after the last one handed out (so a released
// address is not reused at once), and reserves it.
func (a *Allocator) reserve(held map[netip.Addr]Owner, owner Owner, s netip.Prefix) (netip.Addr, error) {
	first, last := usableRange(s)
	start := first
	if prev, err := a.lastReserved(s); err == nil && s.Contains(prev) && !prev.Less(first) && prev.Less(last) {
		start = prev.Next()
	}
	// Every candidate is either in held or free (or was taken concurrently by another process,
	// which the link reports), so a free address is found before len(held)+1 known-taken ones
	// have been skipped unless the range is full. The bound keeps the loop short for huge IPv6
	// ranges too.
	ip, budget := start, len(held)+1
	for budget > 0 {
		if _, taken := held[ip]; taken {
			budget--
		} else {
			err := a.create(ip, owner)
			if atomicfile.IsNoSpace(err) {
				// The disk is full: the reservation lives in memory until Flush saves it.
				a.unsaved[ip] = owner
				return ip, nil
			}
			if err == nil {
				// Only a hint for the next allocation: failing to write it changes nothing.
				_ = atomicfile.Write(a.lastReservedPath(s), []byte(ip.String()))
				return ip, nil
			}
			if !errors.Is(err, os.ErrExist) {
				return netip.Addr{}, err
			}
		}
		if ip == last {
			ip = first
		} else {
			ip = ip.Next()
		}
		if ip == start {
			break
		}
	}
	return netip.Addr{}, fmt.Errorf("allocating an address in %v for %v: %w", s, owner, ErrExhausted)
}

// usableRange is the range pods get: after the gateway, up to the last address (IPv4: before
// the broadcast address).
func usableRange(s netip.Prefix) (first, last netip.Addr) {
	first = Gateway(s).Next()
	last = lastAddr(s)
	if s.Addr().Is4() {
		last = last.Prev()
	}
	return first, last
}

func lastAddr(s netip.Prefix) netip.Addr {
	b := s.Masked().Addr().AsSlice()
	for i := s.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	ip, _ := netip.AddrFromSlice(b)
	return ip
}

// create reserves ip for owner atomically: the content is written to a temporary file, which is
// then hard-linked to the address's name; the link fails with os.ErrExist if it is taken.
func (a *Allocator) create(ip netip.Addr, owner Owner) error {
	f, err := os.CreateTemp(a.dir, ".reserve-*")
	if err != nil {
		return fmt.Errorf("reserving %s: %w", ip, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, werr := f.Write(owner.encode())
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("reserving %s: %w", ip, werr)
	}
	if err := os.Link(tmp, filepath.Join(a.dir, ip.String())); err != nil {
		if errors.Is(err, os.ErrExist) {
			return os.ErrExist
		}
		return fmt.Errorf("reserving %s: %w", ip, err)
	}
	return atomicfile.SyncDir(a.dir)
}

func (a *Allocator) remove(ip netip.Addr) error {
	delete(a.unsaved, ip)
	if err := os.Remove(filepath.Join(a.dir, ip.String())); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("releasing %s: %w", ip, err)
	}
	return nil
}

func (a *Allocator) lastReservedPath(s netip.Prefix) string {
	fam := "v4"
	if s.Addr().Is6() {
		fam = "v6"
	}
	return filepath.Join(a.dir, "last_reserved_ip."+fam)
}

func (a *Allocator) lastReserved(s netip.Prefix) (netip.Addr, error) {
	data, err := os.ReadFile(a.lastReservedPath(s))
	if err != nil {
		return netip.Addr{}, err
	}
	return netip.ParseAddr(strings.TrimSpace(string(data)))
}
