package config

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const minimalController = `
ipPools:
- name: default
  cidrs: ["10.0.10.0/24"]
`

func TestParseControllerMinimalGetsDefaults(t *testing.T) {
	c, err := ParseController([]byte(minimalController))
	require.NoError(t, err)
	want := &ControllerConfig{
		LoadBalancerClass: DefaultLoadBalancerClass,
		BindAddress:       DefaultControllerBindAddress,
		LeaderElection: LeaderElectionConfig{
			Enable:         ptr(true),
			LeaseName:      DefaultLeaseName,
			LeaseNamespace: DefaultLeaseNamespace,
			LeaseDuration:  dur(DefaultLeaseDuration),
			RenewDeadline:  dur(DefaultRenewDeadline),
			RetryPeriod:    dur(DefaultRetryPeriod),
		},
		ReleaseGracePeriod: &Duration{DefaultReleaseGracePeriod},
		AnnouncerLeases:    AnnouncerLeasesConfig{Enable: ptr(true), Namespace: "kube-system"},
		IPPools:            []IPPool{{Name: "default", CIDRs: []string{"10.0.10.0/24"}, IPMode: IPModeVIP, AutoAssign: ptr(true)}},
	}
	require.Empty(t, cmp.Diff(want, c))
	require.True(t, c.LeaderElection.Enabled())
}

func TestParseControllerValues(t *testing.T) {
	in := `
kubeconfig: /etc/antrea/kubeconfig
loadBalancerClass: example.com/lb
bindAddress: "[::1]:9000"
leaderElection:
  enable: false
  leaseName: lb
  leaseNamespace: antrea
  leaseDuration: 30s
  renewDeadline: 20s
  retryPeriod: 5s
releaseGracePeriod: 0s
ipPools:
- name: vip
  cidrs: ["10.0.10.0/24", "fd00:10::/120"]
  ranges: ["10.0.20.10-10.0.20.19", "fd00:20::10 - fd00:20::1f"]
  nodeSelector:
    matchLabels:
      lb: "yes"
    matchExpressions:
    - key: zone
      operator: In
      values: [a, b]
- name: edge
  ipMode: Proxy
  ranges: ["192.0.2.1-192.0.2.1"]
  namespaces: [team-a]
  namespaceSelector: {matchLabels: {tier: edge}}
  serviceSelector: {matchLabels: {expose: edge}}
  autoAssign: false
  allowCrossNamespaceSharing: true
`
	c, err := ParseController([]byte(in))
	require.NoError(t, err)
	want := &ControllerConfig{
		Kubeconfig:        "/etc/antrea/kubeconfig",
		LoadBalancerClass: "example.com/lb",
		BindAddress:       "[::1]:9000",
		LeaderElection: LeaderElectionConfig{
			Enable: ptr(false), LeaseName: "lb", LeaseNamespace: "antrea",
			LeaseDuration: dur(30 * time.Second), RenewDeadline: dur(20 * time.Second), RetryPeriod: dur(5 * time.Second),
		},
		ReleaseGracePeriod: &Duration{},
		AnnouncerLeases:    AnnouncerLeasesConfig{Enable: ptr(true), Namespace: "kube-system"},
		IPPools: []IPPool{{
			Name:       "vip",
			CIDRs:      []string{"10.0.10.0/24", "fd00:10::/120"},
			Ranges:     []string{"10.0.20.10-10.0.20.19", "fd00:20::10 - fd00:20::1f"},
			IPMode:     IPModeVIP,
			AutoAssign: ptr(true),
			NodeSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"lb": "yes"},
				MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "zone", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}},
				},
			},
		}, {
			Name: "edge", Ranges: []string{"192.0.2.1-192.0.2.1"}, IPMode: IPModeProxy,
			Namespaces:                 []string{"team-a"},
			NamespaceSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "edge"}},
			ServiceSelector:            &metav1.LabelSelector{MatchLabels: map[string]string{"expose": "edge"}},
			AutoAssign:                 ptr(false),
			AllowCrossNamespaceSharing: true,
		}},
	}
	require.Empty(t, cmp.Diff(want, c))
	require.False(t, c.LeaderElection.Enabled())
	require.False(t, c.IPPools[1].AutoAssigns())

	ranges, err := c.IPPools[0].AddressRanges()
	require.NoError(t, err)
	a := netip.MustParseAddr
	require.Equal(t, []IPRange{
		{a("10.0.10.1"), a("10.0.10.254")},
		{a("fd00:10::1"), a("fd00:10::ff")},
		{a("10.0.20.10"), a("10.0.20.19")},
		{a("fd00:20::10"), a("fd00:20::1f")},
	}, ranges)
}

func TestParseControllerDecodeErrors(t *testing.T) {
	in := `
loadBalancerClas: x/y
leaderElection:
  leaseDuration: 15
ipPools:
- name: p
  cidr: ["10.0.0.0/24"]
  nodeSelector:
    matchLabels:
      a: 1
    matchLabel: {}
`
	_, err := ParseController([]byte(in))
	require.Equal(t, []string{
		`unknown field "ipPools[0].cidr" (did you mean "cidrs"?)`,
		`unknown field "ipPools[0].nodeSelector.matchLabel" (did you mean "matchLabels"?)`,
		`ipPools[0].nodeSelector.matchLabels.a: expected a string (quote the value), got number 1`,
		`leaderElection.leaseDuration: expected a duration string such as "1s", got number 15`,
		`unknown field "loadBalancerClas" (did you mean "loadBalancerClass"?)`,
	}, errorLines(err))
}

func TestParseControllerValidationErrors(t *testing.T) {
	in := `
kubeAPIServerOverride: "10.0.0.1:port"
loadBalancerClass: nodomain
bindAddress: localhost:10351
leaderElection:
  leaseNamespace: Bad_NS
  leaseDuration: 10s
  renewDeadline: 10s
  retryPeriod: 9s
releaseGracePeriod: -1s
ipPools:
- name: a
  cidrs: ["10.0.0.0/24", "10.1.0.0/33"]
  ranges: ["10.0.0.200-10.0.0.210", "10.2.0.9-10.2.0.1", "10.3.0.1-fd00::1", "x"]
  ipMode: Direct
- name: a
  ipMode: Proxy
  nodeSelector:
    matchExpressions:
    - {key: zone, operator: Near}
- name: ""
  cidrs: ["fd00::/64"]
  namespaces: [Team_A]
  serviceSelector: {matchExpressions: [{key: x, operator: Far}]}
`
	_, err := ParseController([]byte(in))
	require.Equal(t, []string{
		`kubeAPIServerOverride: "10.0.0.1:port" is not a host, host:port or URL: parse "https://10.0.0.1:port": invalid port ":port" after host`,
		`loadBalancerClass: "nodomain" must be prefixed with a domain, e.g. "antrea-proxy.io/lb"`,
		`bindAddress: "localhost:10351" is not an IP:port`,
		`leaderElection.leaseNamespace: "Bad_NS" is not a valid namespace: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`,
		`leaderElection.renewDeadline: 10s must be < leaseDuration (10s)`,
		`leaderElection.retryPeriod: 9s is too long for renewDeadline 10s (must be < renewDeadline/1.2)`,
		`releaseGracePeriod: must be >= 0, got -1s`,
		`ipPools[0].ipMode: "Direct" must be "VIP" or "Proxy"`,
		`ipPools[0].cidrs[1]: "10.1.0.0/33" is not a valid CIDR`,
		`ipPools[0].ranges[1]: "10.2.0.9-10.2.0.1": first address is after last address`,
		`ipPools[0].ranges[2]: "10.3.0.1-fd00::1" mixes IPv4 and IPv6`,
		`ipPools[0].ranges[3]: "x" is not a range "first-last"`,
		`ipPools[0]: 10.0.0.200-10.0.0.210 overlaps 10.0.0.1-10.0.0.254 of ipPools[0]`,
		`ipPools[1].name: "a" is already the name of ipPools[0]`,
		`ipPools[1].nodeSelector: only applies to ipMode "VIP": nodes never announce "Proxy" addresses`,
		`ipPools[1].nodeSelector: "Near" is not a valid label selector operator`,
		`ipPools[1]: needs at least one entry in cidrs or ranges`,
		`ipPools[2].name: required`,
		`ipPools[2].serviceSelector: "Far" is not a valid label selector operator`,
		`ipPools[2].namespaces[0]: "Team_A" is not a valid namespace: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`,
	}, errorLines(err))
}

func TestCIDRRange(t *testing.T) {
	a := netip.MustParseAddr
	for _, tc := range []struct {
		in   string
		want IPRange
	}{
		{"10.0.0.0/24", IPRange{a("10.0.0.1"), a("10.0.0.254")}},
		{"10.0.0.7/24", IPRange{a("10.0.0.1"), a("10.0.0.254")}},
		{"10.0.0.4/30", IPRange{a("10.0.0.5"), a("10.0.0.6")}},
		{"10.0.0.4/31", IPRange{a("10.0.0.4"), a("10.0.0.5")}},
		{"10.0.0.4/32", IPRange{a("10.0.0.4"), a("10.0.0.4")}},
		{"fd00::/120", IPRange{a("fd00::1"), a("fd00::ff")}},
		{"fd00::/127", IPRange{a("fd00::"), a("fd00::1")}},
	} {
		require.Equal(t, tc.want, CIDRRange(netip.MustParsePrefix(tc.in)), tc.in)
	}
	r := IPRange{a("10.0.0.1"), a("10.0.0.3")}
	require.True(t, r.Contains(a("10.0.0.3")))
	require.True(t, r.Contains(a("::ffff:10.0.0.2")))
	require.False(t, r.Contains(a("10.0.0.4")))
	require.False(t, r.Contains(a("fd00::2")))
}

func TestLoadController(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.conf")
	require.NoError(t, os.WriteFile(good, []byte(minimalController), 0o600))
	c, err := LoadController(good)
	require.NoError(t, err)
	require.Equal(t, "default", c.IPPools[0].Name)

	bad := filepath.Join(dir, "bad.conf")
	require.NoError(t, os.WriteFile(bad, []byte("ipPools: [{name: x, cidrs: [0.0.0.0/0]}]\n"), 0o600))
	_, err = LoadController(bad)
	require.ErrorContains(t, err, "loading antrea-controller config "+bad+`: ipPools[0].cidrs[0]: pool "x": 0.0.0.0/0 is too broad`)

	_, err = LoadController(filepath.Join(dir, "missing.conf"))
	require.ErrorContains(t, err, "reading antrea-controller config")
}

// TestAnnouncerValidation: every problem of the announcer settings is reported.
func TestAnnouncerValidation(t *testing.T) {
	a := AnnouncerConfig{LeaseNamespace: "Bad_NS", LeaseDuration: dur(1500 * time.Millisecond), RenewInterval: dur(time.Second),
		HandoverTimeout: &Duration{Duration: -time.Second}, IdleRenewInterval: &Duration{Duration: 100 * time.Millisecond}}
	err := a.validate()
	for _, want := range []string{"announcer.leaseNamespace", "announcer.leaseDuration", "announcer.renewInterval", "announcer.handoverTimeout", "announcer.idleRenewInterval"} {
		require.ErrorContains(t, err, want)
	}
	a = AnnouncerConfig{LeaseDuration: dur(2 * time.Second), RenewInterval: dur(500 * time.Millisecond), IdleRenewInterval: &Duration{Duration: 1500 * time.Millisecond}}
	require.Equal(t, 3*time.Second, a.IdleLeaseDuration(), "twice the idle interval, in whole seconds")
	a.IdleRenewInterval = &Duration{Duration: 500 * time.Millisecond}
	require.Equal(t, 2*time.Second, a.IdleLeaseDuration(), "at least leaseDuration")
	c := AnnouncerLeasesConfig{Namespace: "Bad_NS"}
	require.ErrorContains(t, c.validate(), "announcerLeases.namespace")
	c.Enable = ptr(false)
	require.NoError(t, c.validate(), "a disabled section is not checked")
}

// TestProxyEnforcesSourceRangesOnlyOnProxyPools: the statement belongs to Proxy pools.
func TestProxyEnforcesSourceRangesOnlyOnProxyPools(t *testing.T) {
	c := &ControllerConfig{IPPools: []IPPool{
		{Name: "vip", CIDRs: []string{"10.0.10.0/28"}, ProxyEnforcesSourceRanges: true},
		{Name: "edge", Ranges: []string{"192.0.2.1-192.0.2.1"}, IPMode: IPModeProxy, ProxyEnforcesSourceRanges: true},
	}}
	c.Defaults()
	err := c.Validate()
	require.ErrorContains(t, err, `ipPools[0].proxyEnforcesSourceRanges: only applies to ipMode "Proxy"`)
	require.NotContains(t, err.Error(), "ipPools[1]")
}
