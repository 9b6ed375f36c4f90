package apiv1

import (
	"net/netip"
	"testing"
)

func TestParseTraceRequest(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		want     TraceRequest
		err      string
	}{
		{from: "pod:ns/web", to: "10.96.0.10:80", want: TraceRequest{FromKind: FromPod, PodNamespace: "ns", PodName: "web",
			To: netip.MustParseAddrPort("10.96.0.10:80"), Protocol: "TCP"}},
		{from: "node", to: "[fd00::10]:53/udp", want: TraceRequest{FromKind: FromNode, To: netip.MustParseAddrPort("[fd00::10]:53"), Protocol: "UDP"}},
		{from: "external", to: "10.0.0.1:1/SCTP", want: TraceRequest{FromKind: FromExternal, To: netip.MustParseAddrPort("10.0.0.1:1"), Protocol: "SCTP"}},
		{from: "external:203.0.113.7", to: "10.0.0.1:80", want: TraceRequest{FromKind: FromExternal, ExternalIP: netip.MustParseAddr("203.0.113.7"),
			To: netip.MustParseAddrPort("10.0.0.1:80"), Protocol: "TCP"}},
		{from: "external:2001:db8::7", to: "10.0.0.1:80", err: `from 2001:db8::7 and to 10.0.0.1 are of different IP families`},
		{from: "node:x", to: "10.0.0.1:0", err: `from "node:x": want pod:NAMESPACE/NAME, node, external or external:IP; to "10.0.0.1:0": want IP:PORT[/PROTO] with a port from 1 to 65535 ([IPv6]:PORT)`},
		{from: "pod:ns/a/b", to: "10.0.0.1:80/icmp", err: `from "pod:ns/a/b": a pod is pod:NAMESPACE/NAME; to "10.0.0.1:80/icmp": protocol "icmp" is not TCP, UDP or SCTP`},
		{from: "external:nowhere", to: "", err: `from "external:nowhere": "nowhere" is not an IP address; to "": want IP:PORT[/PROTO] with a port from 1 to 65535 ([IPv6]:PORT)`},
	} {
		got, err := ParseTraceRequest(tc.from, tc.to)
		switch {
		case tc.err != "" && (err == nil || err.Error() != tc.err):
			t.Errorf("%q %q: error %v, want %q", tc.from, tc.to, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%q %q: %+v, %v; want %+v", tc.from, tc.to, got, err, tc.want)
		case tc.err == "" && (got.From() != tc.from || parseRoundTrip(t, got) != got):
			t.Errorf("%q: From() = %q", tc.from, got.From())
		}
	}
}

// parseRoundTrip parses what From and ToString render.
func parseRoundTrip(t *testing.T, r TraceRequest) TraceRequest {
	t.Helper()
	got, err := ParseTraceRequest(r.From(), r.ToString())
	if err != nil {
		t.Fatal(err)
	}
	return got
}
