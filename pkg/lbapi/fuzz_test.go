package lbapi

import (
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// checkPlainAddr fails unless a is valid, unmapped and zone-free.
func checkPlainAddr(t *testing.T, what string, a netip.Addr) {
	t.Helper()
	if !a.IsValid() || a.Is4In6() || a.Zone() != "" {
		t.Fatalf("%s: %v is not a plain IP address", what, a)
	}
}

// FuzzParseIPList checks the antrea-proxy.io/load-balancer-ips parser: only plain addresses
// come out, an error is returned exactly when some non-empty entry is dropped, and the
// rendered result parses to the same list.
func FuzzParseIPList(f *testing.F) {
	for _, s := range []string{"10.0.10.5", "10.0.10.5, fd00:10::5", " ::ffff:10.0.0.1 ,,", "fe80::1%eth0", "10.0.10.300,x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ips, err := ParseIPList(s)
		nonEmpty := 0
		for _, p := range strings.Split(s, ",") {
			if strings.TrimSpace(p) != "" {
				nonEmpty++
			}
		}
		if (err == nil) != (len(ips) == nonEmpty) {
			t.Fatalf("ParseIPList(%q) = %v, %v from %d entries", s, ips, err, nonEmpty)
		}
		parts := make([]string, len(ips))
		for i, a := range ips {
			checkPlainAddr(t, s, a)
			parts[i] = a.String()
		}
		again, err := ParseIPList(strings.Join(parts, ","))
		if err != nil || !slices.Equal(again, ips) {
			t.Fatalf("ParseIPList(%q) = %v, rendered and parsed %v (%v)", s, ips, again, err)
		}
	})
}

// FuzzParseAnnouncingNodes checks the antrea-proxy.io/announcing-node parser: entries come out
// with a valid, unmapped address and a node, an error is returned exactly when a non-empty
// entry is dropped, and FormatAnnouncingNodes' rendering parses to the same announcements.
func FuzzParseAnnouncingNodes(f *testing.F) {
	for _, s := range []string{"10.0.10.5=node-1", "10.0.10.5=node-1, fd00:10::5=node-2", "10.0.10.5=", "=node", "10.0.10.5", "a=b=c", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		as, err := ParseAnnouncingNodes(s)
		nonEmpty := 0
		for _, p := range strings.Split(s, ",") {
			if strings.TrimSpace(p) != "" {
				nonEmpty++
			}
		}
		if (err == nil) != (len(as) == nonEmpty) {
			t.Fatalf("ParseAnnouncingNodes(%q) = %v, %v from %d entries", s, as, err, nonEmpty)
		}
		for _, a := range as {
			if !a.Addr.IsValid() || a.Addr.Is4In6() || a.Node == "" {
				t.Fatalf("ParseAnnouncingNodes(%q): bad entry %+v", s, a)
			}
		}
		again, err := ParseAnnouncingNodes(FormatAnnouncingNodes(as))
		if err != nil || !reflect.DeepEqual(again, as) {
			t.Fatalf("ParseAnnouncingNodes(%q) = %v, formatted and parsed %v (%v)", s, as, again, err)
		}
	})
}
