package ipam

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/antrea-proxy/antrea-proxy/pkg/cni/internal/atomicfile"
)

// corruptPrefix starts the container ID of the owner that scan gives a reservation it cannot
// read or decode.
const corruptPrefix = "<corrupt>"

func corruptOwner(ip netip.Addr) Owner { return Owner{ContainerID: corruptPrefix, IfName: ip.String()} }

// Corrupt reports whether o stands for a reservation that could not be read or decoded (as
// returned by Owners).
func (o Owner) Corrupt() bool { return strings.HasPrefix(o.ContainerID, corruptPrefix) }

// File is the reservation file of ip.
func (a *Allocator) File(ip netip.Addr) string { return filepath.Join(a.dir, ip.String()) }

// Corrupt returns the addresses whose reservation file cannot be read or decoded. They stay
// out of use until Repair gives them an owner or the file is removed.
func (a *Allocator) Corrupt() ([]netip.Addr, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	held, err := a.scan()
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for ip, o := range held {
		if o.Corrupt() {
			out = append(out, ip)
		}
	}
	return out, nil
}

// Repair rewrites the reservation of ip for owner (its file was corrupt, and owner is known to
// use the address).
func (a *Allocator) Repair(ip netip.Addr, owner Owner) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	err := atomicfile.Write(a.File(ip), owner.encode())
	if atomicfile.IsNoSpace(err) {
		a.unsaved[ip] = owner
		return nil
	}
	return err
}

// Unsaved returns how many reservations are kept in memory only (made while the disk was
// full).
func (a *Allocator) Unsaved() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.unsaved)
}

// Flush writes the reservations kept in memory. Those that still cannot be written stay in
// memory; the error says how many.
func (a *Allocator) Flush() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var first error
	for ip, o := range a.unsaved {
		err := a.create(ip, o)
		if errors.Is(err, os.ErrExist) {
			// Written by a Repair or an earlier partial flush: make sure it is o's.
			err = atomicfile.Write(a.File(ip), o.encode())
		}
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		delete(a.unsaved, ip)
	}
	if first != nil {
		return fmt.Errorf("%d address reservations still unsaved: %w", len(a.unsaved), first)
	}
	return nil
}
