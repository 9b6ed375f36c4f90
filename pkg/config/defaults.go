package config

import (
	"os"
	"strings"
	"time"
)

// Env is the part of the process environment that defaulting reads. Tests
// pass a fake one to stay hermetic; a nil function means "not available".
type Env struct {
	// Getenv returns the value of an environment variable ("" if unset).
	Getenv func(key string) string
	// Hostname returns the host name.
	Hostname func() (string, error)
}

// OSEnv returns the Env of the running process.
func OSEnv() Env {
	return Env{Getenv: os.Getenv, Hostname: os.Hostname}
}

// Defaults fills every unset field of c with its default, reading NODE_NAME
// and the host name from the running process.
func (c *AgentConfig) Defaults() { c.DefaultsFrom(OSEnv()) }

// DefaultsFrom is Defaults with an explicit environment.
//
// nodeName defaults to $NODE_NAME, else to the lower-cased host name (as the
// kubelet names its Node); if neither is available it stays "" and Validate
// reports it.
func (c *AgentConfig) DefaultsFrom(env Env) {
	if c.NodeName == "" {
		c.NodeName = defaultNodeName(env)
	}
	setString(&c.OVSBridge, DefaultOVSBridge)
	setString(&c.OVSDatapathType, DefaultOVSDatapathType)
	setString(&c.OVSRunDir, DefaultOVSRunDir)
	setString(&c.OVSOpenFlowBackend, DefaultOVSOpenFlowBackend)
	setString(&c.HostGateway, DefaultHostGateway)
	setString(&c.APISocket, DefaultAPISocket)

	p := &c.AntreaProxy
	setBool(&p.Enable, true)
	setBool(&p.ProxyLoadBalancerIPs, DefaultProxyLoadBalancerIPs)
	// Empty rather than nil lists, so that Marshal shows "[]" not "null".
	if p.NodePortAddresses == nil {
		p.NodePortAddresses = []string{}
	}
	if p.ExternalIPCIDRs == nil {
		p.ExternalIPCIDRs = []string{}
	}
	if p.SkipServices == nil {
		p.SkipServices = []string{}
	}
	setDuration(&p.MinSyncInterval, DefaultMinSyncInterval)
	setDuration(&p.FullSyncPeriod, DefaultFullSyncPeriod)
	setString(&p.HealthzBindAddress, DefaultHealthzBindAddress)
	setString(&p.MetricsBindAddress, DefaultMetricsBindAddress)
	setString(&p.LoadBalancerClass, DefaultLoadBalancerClass)
	c.Announcer.defaults()
	p.budgetDefaults()
}

func defaultNodeName(env Env) string {
	if env.Getenv != nil {
		if n := strings.TrimSpace(env.Getenv(NodeNameEnv)); n != "" {
			return n
		}
	}
	if env.Hostname != nil {
		if h, err := env.Hostname(); err == nil {
			return strings.ToLower(strings.TrimSpace(h))
		}
	}
	return ""
}

func setString(s *string, def string) {
	if *s == "" {
		*s = def
	}
}

func setBool(b **bool, def bool) {
	if *b == nil {
		v := def
		*b = &v
	}
}

func setDuration(d *Duration, def time.Duration) {
	if d.Duration == 0 {
		d.Duration = def
	}
}
