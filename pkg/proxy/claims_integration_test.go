package proxy

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// TestIntegrationClaimsRealOVS is the measured bypass on a real userspace OVS: Service "victim"
// has ClusterIP 10.96.0.10 and its backend pod1; a newer Service "attacker" asks for
// externalIPs [10.96.0.10] on the same port with externalTrafficPolicy Local and its own
// backend pod2. Every connection from a pod to the ClusterIP must reach pod1; the attacker
// shows FlowConflict naming the victim.
func TestIntegrationClaimsRealOVS(t *testing.T) {
	l, client := clientAndTwoPods(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The client is a local pod (what the CNI server's classifier flow says of a pod's port):
	// the eTP=Local entries for pods are the ones above the ClusterIP's flow.
	classify := of.Flow{Table: pipeline.TableClassifier, Priority: pipeline.PriorityNormal, Match: of.Match{InPort: client.Veth.OFPort},
		Actions: []of.Action{of.SetReg{Reg: pipeline.RegSource, Value: pipeline.SourcePod, Mask: pipeline.SourceMask},
			of.GotoTable{Table: pipeline.TableSNATConntrackZone}}}
	if err := l.OF.Apply(ctx, []of.Op{{Kind: of.AddFlow, Flow: &classify}}); err != nil {
		t.Fatal(err)
	}

	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	victim := makeService("default", "victim", "10.96.0.10")
	victim.CreationTimestamp = t0
	attacker := makeService("default", "attacker", "10.96.0.20", withExternalIPs("10.96.0.10"), withETPLocal)
	attacker.CreationTimestamp = metav1.NewTime(t0.Add(time.Hour))
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.168.77.10"}}}}
	p := runOnLab(ctx, t, l, false, node, victim, attacker,
		makeSlice("default", "victim", "victim-1", 8080, v1.ProtocolTCP, "http", ep{ip: "10.10.0.11", node: testNode, ready: true}),
		makeSlice("default", "attacker", "attacker-1", 8080, v1.ProtocolTCP, "http", ep{ip: "10.10.0.12", node: testNode, ready: true}))
	waitFor(t, 20*time.Second, "both Services installed", func() bool { return len(p.Services()) == 2 })

	seen := map[string]int{}
	for i := range 12 {
		server, _, err := l.Dial(ctx, client, "10.96.0.10:80", 2*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v\nflows:\n%s", i, err, l.Flows())
		}
		seen[server]++
	}
	if seen["pod1"] != 12 {
		t.Errorf("connections to the victim's ClusterIP answered by %v, want all 12 by pod1\nflows:\n%s", seen, l.Flows())
	}
	for _, st := range p.Services() {
		if st.Name.Name == "attacker" && (st.Problem == nil || st.Problem.Reason != ProblemFlowConflict) {
			t.Errorf("attacker: want a FlowConflict problem, got %+v", st.Problem)
		}
	}
}
