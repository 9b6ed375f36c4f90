package model

import (
	"net/netip"
	"strconv"
	"strings"
)

// parseAddr parses an IP address as found in Kubernetes objects. Surrounding whitespace is
// ignored, IPv4-mapped IPv6 addresses are unmapped to IPv4 (Kubernetes treats them as IPv4),
// addresses with an IPv6 zone are rejected, and IPv4 octets with leading zeros (accepted by
// older apiservers and still present in old objects) are read as decimal, as Kubernetes does.
func parseAddr(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return netip.Addr{}, false
	}
	addr, err := netip.ParseAddr(s)
	if err != nil {
		return parseLegacyIPv4(s)
	}
	if addr.Zone() != "" {
		return netip.Addr{}, false
	}
	return addr.Unmap(), true
}

// parseLegacyIPv4 accepts dotted-quad IPv4 whose octets may carry leading zeros ("010.0.0.1"
// is 10.0.0.1, not octal).
func parseLegacyIPv4(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return netip.Addr{}, false
	}
	var b [4]byte
	for i, p := range parts {
		if p == "" || len(p) > 3 {
			return netip.Addr{}, false
		}
		for _, c := range p {
			if c < '0' || c > '9' {
				return netip.Addr{}, false
			}
		}
		n, err := strconv.Atoi(p)
		if err != nil || n > 255 {
			return netip.Addr{}, false
		}
		b[i] = byte(n)
	}
	return netip.AddrFrom4(b), true
}

// parsePrefix parses a CIDR the way parseAddr parses an address and masks host bits, so
// "10.0.0.1/24" becomes 10.0.0.0/24.
func parsePrefix(s string) (netip.Prefix, bool) {
	s = strings.TrimSpace(s)
	addrPart, bitsPart, found := strings.Cut(s, "/")
	if !found {
		return netip.Prefix{}, false
	}
	addr, ok := parseAddr(addrPart)
	if !ok {
		return netip.Prefix{}, false
	}
	if bitsPart == "" || len(bitsPart) > 3 {
		return netip.Prefix{}, false
	}
	for _, c := range bitsPart {
		if c < '0' || c > '9' {
			return netip.Prefix{}, false
		}
	}
	bits, err := strconv.Atoi(bitsPart)
	if err != nil {
		return netip.Prefix{}, false
	}
	// An IPv4-mapped address was unmapped by parseAddr; a /96+ prefix on it maps to IPv4 bits.
	if strings.Contains(addrPart, ":") && addr.Is4() {
		bits -= 96
		if bits < 0 {
			return netip.Prefix{}, false
		}
	}
	p, err := addr.Prefix(bits)
	if err != nil {
		return netip.Prefix{}, false
	}
	return p, true
}
