package model

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
)

func modePtr(m string) *v1.LoadBalancerIPMode {
	v := v1.LoadBalancerIPMode(m)
	return &v
}

func TestDecideLBIngressMatrix(t *testing.T) {
	modes := []struct {
		name string
		mode *v1.LoadBalancerIPMode
	}{
		{"VIP", modePtr("VIP")},
		{"Proxy", modePtr("Proxy")},
		{"unset", nil},
		{"empty", modePtr("")},
		{"unknown", modePtr("Passthrough")},
	}
	want := map[bool]map[string]Decision{
		true: {
			"VIP":     {true, ReasonProgrammedVIP},
			"Proxy":   {false, ReasonSkippedProxy},
			"unset":   {true, ReasonProgrammedUnset},
			"empty":   {true, ReasonProgrammedUnset},
			"unknown": {false, ReasonSkippedUnknownMode},
		},
		false: {
			"VIP":     {false, ReasonSkippedDisabled},
			"Proxy":   {false, ReasonSkippedDisabled},
			"unset":   {false, ReasonSkippedDisabled},
			"empty":   {false, ReasonSkippedDisabled},
			"unknown": {false, ReasonSkippedDisabled},
		},
	}
	for _, proxyLB := range []bool{true, false} {
		for _, m := range modes {
			for _, ip := range []string{"192.0.2.10", "2001:db8::10"} {
				t.Run(fmt.Sprintf("proxyLB=%v/%s/%s", proxyLB, m.name, ip), func(t *testing.T) {
					ing := v1.LoadBalancerIngress{IP: ip, IPMode: m.mode}
					got := DecideLBIngress(proxyLB, ing, DualStack)
					if diff := cmp.Diff(want[proxyLB][m.name], got); diff != "" {
						t.Errorf("decision (-want +got):\n%s", diff)
					}
				})
			}
		}
	}
}

func TestDecideLBIngressOrder(t *testing.T) {
	v4only := Families{IPv4: true}
	v6only := Families{IPv6: true}
	tests := []struct {
		name    string
		proxyLB bool
		ing     v1.LoadBalancerIngress
		served  Families
		want    Decision
	}{
		{"hostname only", true, v1.LoadBalancerIngress{Hostname: "lb.example.com"}, DualStack, Decision{false, ReasonSkippedHostname}},
		// Hostname wins over every later check, including disabled and Proxy.
		{"hostname only, disabled, Proxy", false, v1.LoadBalancerIngress{Hostname: "lb.example.com", IPMode: modePtr("Proxy")}, DualStack, Decision{false, ReasonSkippedHostname}},
		{"unparseable IP with hostname", true, v1.LoadBalancerIngress{IP: "not-an-ip", Hostname: "h"}, DualStack, Decision{false, ReasonSkippedHostname}},
		{"empty ingress", true, v1.LoadBalancerIngress{}, DualStack, Decision{false, ReasonSkippedHostname}},
		{"IPv6 zone is not an IP", true, v1.LoadBalancerIngress{IP: "fe80::1%eth0"}, DualStack, Decision{false, ReasonSkippedHostname}},
		{"IPv6 on v4-only proxier", true, v1.LoadBalancerIngress{IP: "2001:db8::1"}, v4only, Decision{false, ReasonSkippedFamily}},
		{"IPv4 on v6-only proxier", true, v1.LoadBalancerIngress{IP: "192.0.2.1"}, v6only, Decision{false, ReasonSkippedFamily}},
		// Family is checked before proxyLoadBalancerIPs and ipMode.
		{"family before disabled", false, v1.LoadBalancerIngress{IP: "2001:db8::1", IPMode: modePtr("Proxy")}, v4only, Decision{false, ReasonSkippedFamily}},
		{"no family served", true, v1.LoadBalancerIngress{IP: "192.0.2.1"}, Families{}, Decision{false, ReasonSkippedFamily}},
		{"IPv4-mapped IPv6 counts as IPv4", true, v1.LoadBalancerIngress{IP: "::ffff:192.0.2.1"}, v4only, Decision{true, ReasonProgrammedUnset}},
		{"legacy leading zeros", true, v1.LoadBalancerIngress{IP: "192.000.002.001", IPMode: modePtr("VIP")}, v4only, Decision{true, ReasonProgrammedVIP}},
		{"disabled before Proxy", false, v1.LoadBalancerIngress{IP: "192.0.2.1", IPMode: modePtr("Proxy")}, v4only, Decision{false, ReasonSkippedDisabled}},
		{"ipMode is case sensitive", true, v1.LoadBalancerIngress{IP: "192.0.2.1", IPMode: modePtr("vip")}, v4only, Decision{false, ReasonSkippedUnknownMode}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := DecideLBIngress(tc.proxyLB, tc.ing, tc.served)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLBIngressFromAPI(t *testing.T) {
	got := LBIngressFromAPI(true, v1.LoadBalancerIngress{IP: "192.0.2.1", Hostname: "h", IPMode: modePtr("Proxy")}, DualStack)
	want := LBIngress{IP: netip.MustParseAddr("192.0.2.1"), Hostname: "h", IPMode: IPModeProxy, Decision: Decision{false, ReasonSkippedProxy}}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	got = LBIngressFromAPI(true, v1.LoadBalancerIngress{Hostname: "h"}, DualStack)
	if got.IP.IsValid() || got.Decision.Reason != ReasonSkippedHostname {
		t.Errorf("hostname-only ingress: got %+v", got)
	}
}

func TestFamilies(t *testing.T) {
	v4, v6 := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fd00::1")
	tests := []struct {
		f          Families
		serves4    bool
		serves6    bool
		stringForm string
	}{
		{Families{}, false, false, "none"},
		{Families{IPv4: true}, true, false, "IPv4"},
		{Families{IPv6: true}, false, true, "IPv6"},
		{DualStack, true, true, "IPv4,IPv6"},
	}
	for _, tc := range tests {
		if tc.f.Serves(v4) != tc.serves4 || tc.f.Serves(v6) != tc.serves6 || tc.f.String() != tc.stringForm {
			t.Errorf("%+v: Serves(v4)=%v Serves(v6)=%v String=%q", tc.f, tc.f.Serves(v4), tc.f.Serves(v6), tc.f.String())
		}
		if tc.f.Serves(netip.Addr{}) {
			t.Errorf("%+v serves the invalid address", tc.f)
		}
	}
}
