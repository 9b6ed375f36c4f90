package config

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"sigs.k8s.io/yaml"
)

// sameConfig compares configs treating an empty list like an absent one (omitempty drops it).
func sameConfig(a, b any) bool { return cmp.Equal(a, b, cmpopts.EquateEmpty()) }

// FuzzParseAgentConfig checks that decoding antrea-agent.conf never panics (also on the
// partially decoded config that Validate sees after schema errors), that an accepted config
// validates, that its derived values (skipServices, nodePortAddresses, virtual IPs, cluster
// CIDRs) are usable, and that Marshal's output parses back to the same config.
func FuzzParseAgentConfig(f *testing.F) {
	if conf, err := os.ReadFile("testdata/antrea-agent.conf"); err == nil {
		f.Add(conf)
	} else {
		f.Fatalf("seed: %v", err)
	}
	for _, s := range []string{
		"", "nodeName: n1\n", "{}", "null", "antreaProxy: {skipServices: [kube-system/kube-dns, 10.96.0.10, '::ffff:10.0.0.1']}\n",
		"antreaProxy:\n  minSyncInterval: 1s\n  fullSyncPeriod: 500ms\n  nodePortAddresses: [10.0.0.1/8]\n",
		"apiTCPAddress: '[::1]:10350'\napiTokenFile: /etc/token\n",
		"nodeNetwork: {mtu: 1400, clusterCIDRs: [10.244.0.0/16], serviceVirtualIPv6: 'fd00::1'}\n",
		"ovsBridge: yes\nantreaProxy: {enable: 1, unknwn: 2}\n", "a: b: c", "- [",
	} {
		f.Add([]byte(s))
	}
	env := fakeEnv("node-1", "host-1")
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseWithEnv(data, env)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted config does not validate: %v", err)
		}
		if _, err := c.AntreaProxy.SkipServiceSet(); err != nil {
			t.Fatalf("accepted skipServices do not parse: %v", err)
		}
		if _, err := c.AntreaProxy.NodePortPrefixes(); err != nil {
			t.Fatalf("accepted nodePortAddresses do not parse: %v", err)
		}
		nodePort, service := c.NodeNetwork.VirtualIPs()
		for _, a := range append(nodePort, service...) {
			if !a.IsValid() {
				t.Fatalf("accepted config has invalid virtual IPs %v %v", nodePort, service)
			}
		}
		if got := c.NodeNetwork.ClusterPrefixes(); len(got) != len(c.NodeNetwork.ClusterCIDRs) {
			t.Fatalf("clusterCIDRs %q gave prefixes %v", c.NodeNetwork.ClusterCIDRs, got)
		}
		out, err := c.Marshal()
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		again, err := ParseWithEnv(out, env)
		if err != nil {
			t.Fatalf("Marshal output does not parse: %v\n%s", err, out)
		}
		if !sameConfig(c, again) {
			t.Fatalf("round trip changed the config:\n%+v\n%+v\n%s", c, again, out)
		}
	})
}

// FuzzParseController checks that decoding antrea-controller.conf never panics, that an
// accepted config validates and its pools' address ranges parse (first <= last, one family),
// and that it survives a YAML round trip unchanged.
func FuzzParseController(f *testing.F) {
	for _, s := range []string{
		minimalController,
		"loadBalancerClass: \"antrea-proxy.io/lb\"\nleaderElection:\n  enable: true\n  leaseName: \"antrea-controller\"\n" +
			"  leaseNamespace: \"kube-system\"\n  leaseDuration: \"15s\"\n  renewDeadline: \"10s\"\n  retryPeriod: \"2s\"\n" +
			"ipPools:\n- cidrs:\n  - 192.168.240.0/28\n  name: default\n",
		"ipPools:\n- name: vip\n  cidrs: [\"fd00:10::/120\"]\n  ranges: [\"10.0.20.10-10.0.20.19\", \"fd00:20::10 - fd00:20::1f\"]\n" +
			"  nodeSelector: {matchLabels: {lb: \"yes\"}, matchExpressions: [{key: zone, operator: In, values: [a, b]}]}\n" +
			"- name: edge\n  ipMode: Proxy\n  ranges: [\"192.0.2.1-192.0.2.1\"]\n",
		"ipPools: [{name: a, cidrs: [10.0.0.0/24]}, {name: b, cidrs: [10.0.0.128/25]}]\n",
		"leaderElection: {leaseDuration: 1s, renewDeadline: 2s}\nipPools: []\n", "", "ipPools: {}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseController(data)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted config does not validate: %v", err)
		}
		for _, p := range c.IPPools {
			ranges, err := p.AddressRanges()
			if err != nil {
				t.Fatalf("accepted pool %q: %v", p.Name, err)
			}
			for _, r := range ranges {
				checkRange(t, r)
			}
		}
		out, err := yaml.Marshal(c)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		again, err := ParseController(out)
		if err != nil {
			t.Fatalf("marshaled config does not parse: %v\n%s", err, out)
		}
		if !sameConfig(c, again) {
			t.Fatalf("round trip changed the config:\n%+v\n%+v\n%s", c, again, out)
		}
	})
}

func checkRange(t *testing.T, r IPRange) {
	t.Helper()
	if !r.First.IsValid() || r.First.BitLen() != r.Last.BitLen() || r.Last.Less(r.First) ||
		r.First.Is4In6() || r.First.Zone() != "" || r.Last.Zone() != "" {
		t.Fatalf("bad range %v", r)
	}
	if !r.Contains(r.First) || !r.Contains(r.Last) {
		t.Fatalf("range %v does not contain its ends", r)
	}
}

// FuzzParseIPRange checks that an accepted "first-last" range is well-formed and that its
// String form parses back to the same range.
func FuzzParseIPRange(f *testing.F) {
	for _, s := range []string{
		"10.0.20.10-10.0.20.19", "fd00:20::10 - fd00:20::1f", "192.0.2.1-192.0.2.1", "::ffff:10.0.0.1-10.0.0.2",
		"10.0.0.2-10.0.0.1", "10.0.0.1-fd00::1", "fe80::1%eth0-fe80::2", "10.0.0.1", "-", "1-2-3",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseIPRange(s)
		if err != nil {
			return
		}
		checkRange(t, r)
		again, err := ParseIPRange(r.String())
		if err != nil || again != r {
			t.Fatalf("%q → %v → %v (%v)", s, r, again, err)
		}
	})
}
