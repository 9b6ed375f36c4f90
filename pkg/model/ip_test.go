package model

import (
	"net/netip"
	"testing"
)

func TestParseAddr(t *testing.T) {
	tests := []struct {
		in   string
		want string // "" = invalid
	}{
		{"10.0.0.1", "10.0.0.1"},
		{" 10.0.0.1\t", "10.0.0.1"},
		{"010.001.000.009", "10.1.0.9"},
		{"256.0.0.1", ""},
		{"1.2.3", ""},
		{"1.2.3.4.5", ""},
		{"1..3.4", ""},
		{"0001.2.3.4", ""},
		{"+1.2.3.4", ""},
		{"2001:DB8::1", "2001:db8::1"},
		{"::ffff:10.0.0.1", "10.0.0.1"},
		{"fe80::1%eth0", ""},
		{"", ""},
		{"None", ""},
		{"example.com", ""},
	}
	for _, tc := range tests {
		got, ok := parseAddr(tc.in)
		if tc.want == "" {
			if ok {
				t.Errorf("parseAddr(%q) = %v, want invalid", tc.in, got)
			}
			continue
		}
		if !ok || got != netip.MustParseAddr(tc.want) {
			t.Errorf("parseAddr(%q) = %v, %v; want %s", tc.in, got, ok, tc.want)
		}
	}
}

func TestParsePrefix(t *testing.T) {
	tests := []struct {
		in   string
		want string // "" = invalid
	}{
		{"10.0.0.0/8", "10.0.0.0/8"},
		{" 10.1.2.3/16 ", "10.1.0.0/16"},
		{"010.0.0.0/8", "10.0.0.0/8"},
		{"0.0.0.0/0", "0.0.0.0/0"},
		{"2001:db8::/32", "2001:db8::/32"},
		{"::ffff:10.0.0.0/104", "10.0.0.0/8"},
		{"::ffff:10.0.0.0/64", ""},
		{"10.0.0.0/33", ""},
		{"10.0.0.0/", ""},
		{"10.0.0.0/+8", ""},
		{"10.0.0.0/-1", ""},
		{"10.0.0.0", ""},
		{"garbage/8", ""},
	}
	for _, tc := range tests {
		got, ok := parsePrefix(tc.in)
		if tc.want == "" {
			if ok {
				t.Errorf("parsePrefix(%q) = %v, want invalid", tc.in, got)
			}
			continue
		}
		if !ok || got != netip.MustParsePrefix(tc.want) {
			t.Errorf("parsePrefix(%q) = %v, %v; want %s", tc.in, got, ok, tc.want)
		}
	}
}
