//go:build cluster

package cluster

import "testing"

// The OVS conntrack of the client's node after the two losses seen in TestRealCluster (a remote
// endpoint whose FIN came first; a local endpoint whose TCP keep-alive probe came first), and
// after a roll the connection survived.
func TestFindEndpointFirstPickup(t *testing.T) {
	const (
		remoteLoss = `tcp,orig=(src=10.244.1.4,dst=10.96.136.95,sport=46326,dport=8081),reply=(src=10.244.0.2,dst=10.244.1.4,sport=8081,dport=46327),id=0,zone=65520,status=0,mark=1,protoinfo=(state_orig=TIME_WAIT,state_reply=TIME_WAIT,flags_orig=BE_LIBERAL,flags_reply=BE_LIBERAL)
tcp,orig=(src=10.244.0.2,dst=10.244.1.4,sport=8081,dport=46326),reply=(src=10.244.1.4,dst=10.244.0.2,sport=46326,dport=8081),id=0,zone=65520,status=0,protoinfo=(state_orig=TIME_WAIT,state_reply=TIME_WAIT,flags_orig=BE_LIBERAL,flags_reply=BE_LIBERAL)`
		localLoss = `tcp,orig=(src=10.244.1.4,dst=10.96.72.87,sport=40690,dport=8081),reply=(src=10.244.1.3,dst=10.244.1.4,sport=8081,dport=40691),id=0,zone=65520,status=0,mark=1,protoinfo=(state_orig=TIME_WAIT,state_reply=TIME_WAIT,flags_orig=BE_LIBERAL,flags_reply=BE_LIBERAL)
tcp,orig=(src=10.244.1.3,dst=10.244.1.4,sport=8081,dport=40690),reply=(src=10.244.1.4,dst=10.244.1.3,sport=40690,dport=8081),id=0,zone=65520,status=0,protoinfo=(state_orig=TIME_WAIT,state_reply=TIME_WAIT,flags_orig=BE_LIBERAL,flags_reply=BE_LIBERAL)`
		survived = `tcp,orig=(src=10.244.1.4,dst=10.96.72.87,sport=40690,dport=8081),reply=(src=10.244.1.3,dst=10.244.1.4,sport=8081,dport=40690),id=0,zone=65520,status=0,mark=1,protoinfo=(state_orig=ESTABLISHED,state_reply=ESTABLISHED,flags_orig=BE_LIBERAL,flags_reply=BE_LIBERAL)`
	)
	for _, tc := range []struct {
		name, dump, clusterIP string
		seen                  map[string]bool
		wantPort              string
		want                  bool
	}{
		{"remote endpoint first", remoteLoss, "10.96.136.95", nil, "46326", true},
		{"local endpoint first", localLoss, "10.96.72.87", nil, "40690", true},
		{"already counted", localLoss, "10.96.72.87", map[string]bool{"40690": true}, "", false},
		{"another Service", localLoss, "10.96.0.1", nil, "", false},
		{"the connection survived", survived, "10.96.72.87", nil, "", false},
		{"empty", "", "10.96.72.87", nil, "", false},
	} {
		_, port, ok := findEndpointFirstPickup(tc.dump, "10.244.1.4", tc.clusterIP, 8081, tc.seen)
		if ok != tc.want || port != tc.wantPort {
			t.Errorf("%s: got %q, %v; want %q, %v", tc.name, port, ok, tc.wantPort, tc.want)
		}
	}
}
