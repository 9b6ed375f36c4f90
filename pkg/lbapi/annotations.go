package lbapi

import (
	"fmt"
	"net/netip"
	"strings"
)

// Annotations and finalizer of the project on Services; see the package documentation.
const (
	AnnotationLoadBalancerIPs  = "antrea-proxy.io/load-balancer-ips"
	AnnotationPool             = "antrea-proxy.io/lb-pool"
	AnnotationAllowSharedIP    = "antrea-proxy.io/allow-shared-ip"
	AnnotationRequiredFeatures = "antrea-proxy.io/required-features"
	AnnotationAnnouncingNode   = "antrea-proxy.io/announcing-node"
	// Finalizer is the well-known LoadBalancer cleanup finalizer (KEP-980) that cloud
	// providers' service controllers write and the upstream e2e suite waits for.
	Finalizer = "service.kubernetes.io/load-balancer-cleanup"
	// LegacyFinalizer is the finalizer earlier releases wrote; the controller still cleans up
	// Services that carry it and replaces it with Finalizer.
	LegacyFinalizer = "antrea-proxy.io/load-balancer"
)

// ParseIPList parses a comma-separated list of IP addresses (spaces
// ignored). IPv4-mapped IPv6 addresses are unmapped.
func ParseIPList(s string) ([]netip.Addr, error) {
	var out []netip.Addr
	var bad []string
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		a, err := netip.ParseAddr(part)
		if err != nil || a.Zone() != "" {
			bad = append(bad, fmt.Sprintf("%q", part))
			continue
		}
		out = append(out, a.Unmap())
	}
	if len(bad) > 0 {
		return out, fmt.Errorf("not an IP address: %s", strings.Join(bad, ", "))
	}
	return out, nil
}

// Announcement is the node that announces one VIP-mode address.
type Announcement struct {
	Addr netip.Addr
	Node string
}

// FormatAnnouncingNodes renders the antrea-proxy.io/announcing-node value:
// comma-separated "address=node" pairs in the given order.
func FormatAnnouncingNodes(as []Announcement) string {
	parts := make([]string, len(as))
	for i, a := range as {
		parts[i] = a.Addr.String() + "=" + a.Node
	}
	return strings.Join(parts, ",")
}

// ParseAnnouncingNodes parses an antrea-proxy.io/announcing-node value;
// malformed entries are skipped and reported.
func ParseAnnouncingNodes(s string) ([]Announcement, error) {
	var out []Announcement
	var bad []string
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		ip, node, ok := strings.Cut(part, "=")
		a, err := netip.ParseAddr(ip)
		if !ok || err != nil || node == "" {
			bad = append(bad, fmt.Sprintf("%q", part))
			continue
		}
		out = append(out, Announcement{Addr: a.Unmap(), Node: node})
	}
	if len(bad) > 0 {
		return out, fmt.Errorf("malformed announcing-node entries %s (want address=node)", strings.Join(bad, ", "))
	}
	return out, nil
}

// Announcer Leases: every antrea-agent that may announce VIP-mode addresses renews the
// coordination.k8s.io Lease AnnouncerLeaseName(node) in the configured namespace, labelled
// LabelAnnouncer=<node>; antrea-controller gives a node addresses to announce only while that
// Lease is renewed, and moves them within the Lease's duration after it stops.
const LabelAnnouncer = "antrea-proxy.io/announcer"

// AnnouncerLeaseName is the name of node's announcer Lease.
func AnnouncerLeaseName(node string) string { return "antrea-proxy-announcer-" + node }
