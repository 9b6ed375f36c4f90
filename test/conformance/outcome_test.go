package conformance

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"syscall"
	"testing"
)

func TestSourceClass(t *testing.T) {
	ip := netip.MustParseAddr
	a := Addresses{
		NodeIPs:  []netip.Addr{ip("192.168.77.11"), ip("192.168.77.12")},
		Gateways: []netip.Addr{ip("10.244.0.1"), ip("10.244.1.1")},
		Router:   ip("192.168.77.1"), External: ip("192.168.77.100"),
		Pods: []netip.Addr{ip("10.244.0.5"), ip("10.244.1.5")},
	}
	cases := []struct {
		src, client string
		node        int
		want        string
	}{
		{"10.244.0.5", "10.244.0.5", 1, SrcClient},
		{"192.168.77.11", "192.168.77.11", 0, SrcClient},
		{"10.244.0.1", "10.244.1.5", 0, SrcGWLocal},
		{"10.244.0.1", "10.244.1.5", 1, SrcGWOther},
		{"192.168.77.12", "192.168.77.100", 1, SrcNodeLocal},
		{"192.168.77.12", "192.168.77.100", 0, SrcNodeOther},
		{"169.254.0.253", "192.168.77.100", 0, SrcSVIP},
		{"192.168.77.1", "192.168.77.100", 0, SrcLB},
		{"192.168.77.100", "10.244.0.5", 0, SrcExternal},
		{"10.244.1.5", "10.244.0.5", 0, SrcPod},
		{"10.9.9.9", "10.244.0.5", 0, "other:10.9.9.9"},
	}
	for _, c := range cases {
		if got := a.SourceClass(ip(c.src), ip(c.client), c.node); got != c.want {
			t.Errorf("SourceClass(%s, client %s, node %d) = %s, want %s", c.src, c.client, c.node, got, c.want)
		}
	}
}

func TestFailureClass(t *testing.T) {
	cases := map[error]string{
		syscall.ECONNREFUSED: Refused, syscall.EPERM: Vetoed, syscall.EHOSTUNREACH: Unreachable,
		io.EOF: Closed, syscall.ECONNRESET: Closed, errors.New("odd"): Failed,
	}
	for err, want := range cases {
		if got := FailureClass(fmt.Errorf("wrapped: %w", err)); got != want {
			t.Errorf("FailureClass(%v) = %s, want %s", err, got, want)
		}
	}
}

func TestSticky(t *testing.T) {
	state := func(b string) string { return map[string]string{"b1a": "ready", "b2a": "serving-terminating"}[b] }
	if got := NewOutcome("b1a<-client", "dropped").Sticky(state).String(); got != "dropped sticky:ready" {
		t.Errorf("got %s", got)
	}
	if got := NewOutcome("b1a<-client", "b2a<-client").Sticky(state).String(); got != "unsticky" {
		t.Errorf("got %s", got)
	}
}
