package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// maxIfNameLen is the longest Linux interface name (IFNAMSIZ - 1).
const maxIfNameLen = 15

// maxUnixSocketPath is the longest usable unix socket path on Linux
// (sizeof(sun_path) - 1 for the terminating NUL).
const maxUnixSocketPath = 107

// FieldError is a problem with one option, named by its path in the file
// (e.g. "antreaProxy.nodePortAddresses[1]").
type FieldError struct {
	Path   string
	Reason string
}

func (e *FieldError) Error() string {
	if e.Path == "" {
		return "(top level): " + e.Reason
	}
	return e.Path + ": " + e.Reason
}

func fieldErr(path, format string, args ...any) error {
	return &FieldError{Path: path, Reason: fmt.Sprintf(format, args...)}
}

// Validate checks c, which should already have its defaults, and reports
// every problem at once (errors.Join of *FieldError), or nil.
func (c *AgentConfig) Validate() error {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}

	if c.NodeName == "" {
		add(fieldErr("nodeName", "required (set it here or via the %s environment variable)", NodeNameEnv))
	} else if msgs := validation.IsDNS1123Subdomain(c.NodeName); len(msgs) > 0 {
		add(fieldErr("nodeName", "%q is not a valid Node name: %s", c.NodeName, strings.Join(msgs, "; ")))
	}
	add(validateAPIServerOverride(c.KubeAPIServerOverride))
	add(validateIfName("ovsBridge", c.OVSBridge))
	switch c.OVSDatapathType {
	case DatapathSystem, DatapathNetdev:
	default:
		add(fieldErr("ovsDatapathType", "%q must be %q or %q", c.OVSDatapathType, DatapathSystem, DatapathNetdev))
	}
	add(validateAbsPath("ovsRunDir", c.OVSRunDir))
	switch c.OVSOpenFlowBackend {
	case OpenFlowBackendNative, OpenFlowBackendOfctl:
	default:
		add(fieldErr("ovsOpenFlowBackend", "%q must be %q or %q", c.OVSOpenFlowBackend, OpenFlowBackendNative, OpenFlowBackendOfctl))
	}
	add(validateIfName("hostGateway", c.HostGateway))
	if c.HostGateway != "" && c.HostGateway == c.OVSBridge {
		add(fieldErr("hostGateway", "%q must differ from ovsBridge", c.HostGateway))
	}
	if err := validateAbsPath("apiSocket", c.APISocket); err != nil {
		add(err)
	} else if len(c.APISocket) > maxUnixSocketPath {
		add(fieldErr("apiSocket", "path is %d bytes long; unix socket paths are limited to %d", len(c.APISocket), maxUnixSocketPath))
	}
	errs = append(errs, c.validateAPITCP()...)
	errs = append(errs, c.AntreaProxy.validate("antreaProxy")...)
	errs = append(errs, c.NodeNetwork.validate("nodeNetwork")...)
	if c.Announcer.LeaseEnabled() {
		add(c.Announcer.validate())
	}
	return errors.Join(errs...)
}

func (p *AntreaProxyConfig) validate(path string) []error {
	var errs []error
	for i, s := range p.NodePortAddresses {
		if _, err := netip.ParsePrefix(s); err != nil {
			errs = append(errs, fieldErr(fmt.Sprintf("%s.nodePortAddresses[%d]", path, i), "%q is not a valid CIDR", s))
		}
	}
	for i, s := range p.ExternalIPCIDRs {
		if _, err := netip.ParsePrefix(s); err != nil {
			errs = append(errs, fieldErr(fmt.Sprintf("%s.externalIPCIDRs[%d]", path, i), "%q is not a valid CIDR", s))
		}
	}
	for i, s := range p.SkipServices {
		if _, _, err := parseSkipService(s); err != nil {
			errs = append(errs, fieldErr(fmt.Sprintf("%s.skipServices[%d]", path, i), "%v", err))
		}
	}
	minSync, fullSync := p.MinSyncInterval.Duration, p.FullSyncPeriod.Duration
	if minSync <= 0 {
		errs = append(errs, fieldErr(path+".minSyncInterval", "must be > 0, got %v", minSync))
	}
	if fullSync <= 0 {
		errs = append(errs, fieldErr(path+".fullSyncPeriod", "must be > 0, got %v", fullSync))
	} else if minSync > 0 && fullSync < minSync {
		errs = append(errs, fieldErr(path+".fullSyncPeriod", "%v must be >= minSyncInterval (%v)", fullSync, minSync))
	}
	for _, a := range []struct{ key, value string }{
		{"healthzBindAddress", p.HealthzBindAddress}, {"metricsBindAddress", p.MetricsBindAddress},
	} {
		if a.value == Off {
			continue
		}
		if _, err := netip.ParseAddrPort(a.value); err != nil {
			errs = append(errs, fieldErr(path+"."+a.key, "%q is neither \"off\" nor an IP:port", a.value))
		}
	}
	if err := validateLoadBalancerClass(path+".loadBalancerClass", p.LoadBalancerClass); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, p.validateBudget(path)...)
	errs = append(errs, p.RateLimits.validate(path+".rateLimits")...)
	return errs
}

// validateIfName checks that name is usable as a Linux interface name (the
// rules of the kernel's dev_valid_name).
func validateIfName(path, name string) error {
	switch {
	case name == "":
		return fieldErr(path, "required")
	case len(name) > maxIfNameLen:
		return fieldErr(path, "%q is %d characters long; interface names are limited to %d", name, len(name), maxIfNameLen)
	case name == "." || name == "..":
		return fieldErr(path, "%q is not a valid interface name", name)
	case strings.ContainsAny(name, "/: \t\n\v\f\r"):
		return fieldErr(path, "%q is not a valid interface name: it must not contain '/', ':' or whitespace", name)
	}
	return nil
}

func validateAbsPath(path, p string) error {
	switch {
	case p == "":
		return fieldErr(path, "required")
	case !filepath.IsAbs(p):
		return fieldErr(path, "%q must be an absolute path", p)
	}
	return nil
}

// validateAPITCP checks the optional TCP listener of the agent API: loopback only, and only
// with a token file.
func (c *AgentConfig) validateAPITCP() []error {
	if c.APITCPAddress == "" {
		return nil
	}
	var errs []error
	host, port, err := net.SplitHostPort(c.APITCPAddress)
	if err != nil {
		errs = append(errs, fieldErr("apiTCPAddress", "%q is not an \"ip:port\" address: %v", c.APITCPAddress, err))
	} else {
		if ip, err := netip.ParseAddr(host); err != nil || !ip.Unmap().IsLoopback() || ip.Zone() != "" {
			errs = append(errs, fieldErr("apiTCPAddress", "%q must be a loopback IP address (127.0.0.0/8 or ::1): the agent API is never served on other interfaces", c.APITCPAddress))
		}
		if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
			errs = append(errs, fieldErr("apiTCPAddress", "%q: port must be a number from 1 to 65535", c.APITCPAddress))
		}
	}
	if c.APITokenFile == "" {
		errs = append(errs, fieldErr("apiTokenFile", "required when apiTCPAddress is set: the TCP listener needs a bearer token"))
	} else if err := validateAbsPath("apiTokenFile", c.APITokenFile); err != nil {
		errs = append(errs, err)
	}
	return errs
}
