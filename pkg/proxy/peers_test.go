package proxy

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPeerNodesMoveTheirConnectionsPort: the other Nodes' InternalIPs reach the base flows
// (pipeline.NodeConfig.PeerNodeIPs: ConntrackCommit moves the port of their new TCP
// connections) once a sync committed them, and leave them when the Node goes.
func TestPeerNodesMoveTheirConnectionsPort(t *testing.T) {
	h := newHarness(t, testOptions())
	h.sync()
	const peerFlow = "table=19,priority=202,ct_state=+new+trk,tcp,nw_src=192.168.77.11,tcp_flags=+syn-ack actions=ct(commit,table=20,zone=65520,nat(src=192.168.77.11:32768-65535))"
	if strings.Contains(h.bridge.Dump(), "nw_src=192.168.77.11") {
		t.Fatalf("a peer flow before any peer Node:\n%s", h.bridge.Dump())
	}
	peer := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "peer"}, Status: v1.NodeStatus{Addresses: []v1.NodeAddress{
		{Type: v1.NodeInternalIP, Address: "192.168.77.11"}, {Type: v1.NodeExternalIP, Address: "203.0.113.1"}}}}
	h.p.OnPeerNode(peer.Name, peer)
	h.sync()
	dump := h.bridge.Dump()
	if !strings.Contains(dump, peerFlow) {
		t.Fatalf("no ConntrackCommit flow for the peer's InternalIP:\n%s", dump)
	}
	if strings.Contains(dump, "203.0.113.1") {
		t.Errorf("a flow for the peer's ExternalIP:\n%s", dump)
	}
	h.p.OnPeerNode(peer.Name, nil)
	h.sync()
	if strings.Contains(h.bridge.Dump(), "nw_src=192.168.77.11") {
		t.Errorf("the deleted peer's flows stayed:\n%s", h.bridge.Dump())
	}
}
