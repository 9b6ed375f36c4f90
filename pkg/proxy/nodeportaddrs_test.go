package proxy

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNodePortAddressesFollowCommittedFlows: the proxier reports the NodePort addresses its
// installed base flows serve (the host DNATs NodePorts on exactly these): none before the first
// sync, the Node's addresses within nodePortAddresses after it, and a Node update only once a
// sync committed it.
func TestNodePortAddressesFollowCommittedFlows(t *testing.T) {
	opts := testOptions()
	opts.NodePortAddresses = []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16")}
	h := newHarness(t, opts)
	if got := h.p.NodePortAddresses(); got != nil {
		t.Fatalf("before the first sync: got %v, want none", got)
	}
	h.sync()
	want := []netip.Addr{netip.MustParseAddr("192.168.77.10")}
	if got := h.p.NodePortAddresses(); !slices.Equal(got, want) {
		t.Fatalf("after the first sync: got %v, want %v", got, want)
	}
	if !strings.Contains(h.bridge.Dump(), "table=12,priority=200,ip,nw_dst=192.168.77.10 ") {
		t.Fatalf("the reported address has no NodePortMark flow:\n%s", h.bridge.Dump())
	}

	h.p.OnNodeUpdate(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{
			{Type: v1.NodeInternalIP, Address: "10.99.0.1"}, // outside nodePortAddresses
			{Type: v1.NodeExternalIP, Address: "192.168.77.20"},
			{Type: v1.NodeInternalIP, Address: "192.168.77.11"},
		}}})
	if got := h.p.NodePortAddresses(); !slices.Equal(got, want) {
		t.Fatalf("a Node update before any sync changed the report: got %v, want %v", got, want)
	}
	h.bridge.FailNextApply(errors.New("injected"))
	if err := h.p.SyncNow(context.Background(), false); err == nil {
		t.Fatal("the injected failure did not fail the sync")
	}
	if got := h.p.NodePortAddresses(); !slices.Equal(got, want) {
		t.Fatalf("a failed sync changed the report: got %v, want %v", got, want)
	}
	h.sync()
	want = []netip.Addr{netip.MustParseAddr("192.168.77.20"), netip.MustParseAddr("192.168.77.11")}
	if got := h.p.NodePortAddresses(); !slices.Equal(got, want) {
		t.Fatalf("after the Node update was synced: got %v, want %v", got, want)
	}
	dump := h.bridge.Dump()
	for _, a := range want {
		if !strings.Contains(dump, "nw_dst="+a.String()+" ") {
			t.Errorf("reported address %v has no NodePortMark flow", a)
		}
	}
	if strings.Contains(dump, "nw_dst=192.168.77.10 ") || strings.Contains(dump, "nw_dst=10.99.0.1 ") {
		t.Errorf("an address no longer reported is still marked:\n%s", dump)
	}

	// The caller's copy is its own.
	h.p.NodePortAddresses()[0] = netip.Addr{}
	if got := h.p.NodePortAddresses(); !slices.Equal(got, want) {
		t.Fatalf("the report was modified through a returned slice: %v", got)
	}
}
