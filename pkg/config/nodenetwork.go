package config

import (
	"fmt"
	"net/netip"
)

// Defaults of the nodeNetwork section, applied by its accessors (an omitted section means all
// defaults).
const (
	DefaultCNISocket           = "/var/run/antrea/cni.sock"
	DefaultCNIStateDir         = "/var/lib/antrea-proxy/cni"
	DefaultCNIDelSpoolDir      = "/var/run/antrea/cni-del-spool"
	DefaultNodePortVirtualIPv4 = "169.254.0.252"
	DefaultNodePortVirtualIPv6 = "fc01::aabb:ccdd:eefe"
	DefaultServiceVirtualIPv4  = "169.254.0.253"
	DefaultServiceVirtualIPv6  = "fc01::aabb:ccdd:eeff"

	// EncapModeNoEncap routes pod traffic between Nodes through the underlay: each Node's
	// podCIDR is a host route through that Node's InternalIP.
	EncapModeNoEncap = "noEncap"
)

// NodeNetworkConfig is the nodeNetwork section of antrea-agent.conf: the node data path (host
// gateway, CNI server, host routes and nftables rules).
type NodeNetworkConfig struct {
	// Enable turns the node data path on. Default true; see Enabled.
	Enable *bool `json:"enable,omitempty"`
	// TrafficEncapMode is how pod traffic crosses Nodes; only "noEncap" (the default) exists.
	TrafficEncapMode string `json:"trafficEncapMode,omitempty"`
	// CNISocket is the unix socket of the CNI server. Default /var/run/antrea/cni.sock.
	CNISocket string `json:"cniSocket,omitempty"`
	// CNIStateDir keeps IPAM reservations and pod records. Default /var/lib/antrea-proxy/cni.
	CNIStateDir string `json:"cniStateDir,omitempty"`
	// CNIDelSpoolDir is where antrea-cni spools DELs while the agent is down (the plugin's
	// "delSpoolDir"). Default /var/run/antrea/cni-del-spool.
	CNIDelSpoolDir string `json:"cniDelSpoolDir,omitempty"`
	// MTU of pod interfaces and of the gateway; 0 keeps the kernel default.
	MTU int `json:"mtu,omitempty"`
	// ClusterCIDRs are pod destinations never masqueraded, besides every Node's podCIDRs.
	ClusterCIDRs []string `json:"clusterCIDRs,omitempty"`
	// NodePortVirtualIP(v6) is what the host DNATs NodePort traffic to before routing it into
	// OVS through the gateway (proxyAll). Defaults 169.254.0.252 and fc01::aabb:ccdd:eefe.
	NodePortVirtualIP   string `json:"nodePortVirtualIP,omitempty"`
	NodePortVirtualIPv6 string `json:"nodePortVirtualIPv6,omitempty"`
	// ServiceVirtualIP(v6) is the source OVS gives external Service connections and the
	// virtual next hop of what the host routes into OVS. Defaults 169.254.0.253 and
	// fc01::aabb:ccdd:eeff.
	ServiceVirtualIP   string `json:"serviceVirtualIP,omitempty"`
	ServiceVirtualIPv6 string `json:"serviceVirtualIPv6,omitempty"`
}

// Enabled reports whether the node data path is on (default true).
func (n NodeNetworkConfig) Enabled() bool { return boolOr(n.Enable, true) }

func stringOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// CNISocketPath returns cniSocket or its default.
func (n NodeNetworkConfig) CNISocketPath() string { return stringOr(n.CNISocket, DefaultCNISocket) }

// CNIStatePath returns cniStateDir or its default.
func (n NodeNetworkConfig) CNIStatePath() string { return stringOr(n.CNIStateDir, DefaultCNIStateDir) }

// CNIDelSpoolPath returns cniDelSpoolDir or its default.
func (n NodeNetworkConfig) CNIDelSpoolPath() string {
	return stringOr(n.CNIDelSpoolDir, DefaultCNIDelSpoolDir)
}

// VirtualIPs returns the NodePort and Service virtual IPs (IPv4, IPv6), defaults applied. Call
// it on a validated config.
func (n NodeNetworkConfig) VirtualIPs() (nodePort, service []netip.Addr) {
	parse := func(s, def string) netip.Addr {
		a, _ := netip.ParseAddr(stringOr(s, def))
		return a
	}
	nodePort = []netip.Addr{parse(n.NodePortVirtualIP, DefaultNodePortVirtualIPv4), parse(n.NodePortVirtualIPv6, DefaultNodePortVirtualIPv6)}
	service = []netip.Addr{parse(n.ServiceVirtualIP, DefaultServiceVirtualIPv4), parse(n.ServiceVirtualIPv6, DefaultServiceVirtualIPv6)}
	return nodePort, service
}

// ClusterPrefixes parses clusterCIDRs. Call it on a validated config.
func (n NodeNetworkConfig) ClusterPrefixes() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range n.ClusterCIDRs {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
		}
	}
	return out
}

func (n *NodeNetworkConfig) validate(path string) []error {
	var errs []error
	if m := n.TrafficEncapMode; m != "" && m != EncapModeNoEncap {
		errs = append(errs, fieldErr(path+".trafficEncapMode", "%q is not supported: the only mode is %q", m, EncapModeNoEncap))
	}
	for name, p := range map[string]string{"cniSocket": n.CNISocket, "cniStateDir": n.CNIStateDir, "cniDelSpoolDir": n.CNIDelSpoolDir} {
		if p != "" {
			if err := validateAbsPath(path+"."+name, p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(n.CNISocketPath()) > maxUnixSocketPath {
		errs = append(errs, fieldErr(path+".cniSocket", "path is %d bytes long; unix socket paths are limited to %d", len(n.CNISocketPath()), maxUnixSocketPath))
	}
	if n.MTU != 0 && (n.MTU < 576 || n.MTU > 65535) {
		errs = append(errs, fieldErr(path+".mtu", "%d is outside 576-65535 (0 keeps the kernel default)", n.MTU))
	}
	for i, s := range n.ClusterCIDRs {
		if _, err := netip.ParsePrefix(s); err != nil {
			errs = append(errs, fieldErr(fmt.Sprintf("%s.clusterCIDRs[%d]", path, i), "%q is not a valid CIDR", s))
		}
	}
	for _, f := range []struct {
		name, value string
		ipv6        bool
	}{
		{"nodePortVirtualIP", n.NodePortVirtualIP, false}, {"nodePortVirtualIPv6", n.NodePortVirtualIPv6, true},
		{"serviceVirtualIP", n.ServiceVirtualIP, false}, {"serviceVirtualIPv6", n.ServiceVirtualIPv6, true},
	} {
		if f.value == "" {
			continue
		}
		a, err := netip.ParseAddr(f.value)
		switch {
		case err != nil:
			errs = append(errs, fieldErr(path+"."+f.name, "%q is not an IP address", f.value))
		case a.Is6() != f.ipv6 || a.Is4In6():
			errs = append(errs, fieldErr(path+"."+f.name, "%q is of the wrong IP family", f.value))
		}
	}
	if n.NodePortVirtualIP != "" && n.NodePortVirtualIP == n.ServiceVirtualIP {
		errs = append(errs, fieldErr(path+".serviceVirtualIP", "%q must differ from nodePortVirtualIP", n.ServiceVirtualIP))
	}
	return errs
}
