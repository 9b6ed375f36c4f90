package pipeline

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"testing"
	"time"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/ofctl"
	"github.com/antrea-proxy/antrea-proxy/test/ovssandbox"
)

var natDst = regexp.MustCompile(`nat\(dst=([0-9.]+:[0-9]+)\)`)

// TestIntegrationSplitGroupDistribution installs the groups of a split endpoint set (three
// sub-groups of 512) into a real OVS behind one flow and asks ofproto/trace which endpoint
// distinct 5-tuples get: the two levels must choose independently, so at least 90 % of the
// endpoints are chosen, each sub-group gets its share, and χ² over the endpoints stays within
// what a uniform choice gives.
func TestIntegrationSplitGroupDistribution(t *testing.T) {
	const (
		endpoints = 3 * MaxGroupBuckets
		tuples    = 6000
	)
	o := ovssandbox.Start(t, ovssandbox.Options{})
	br := "brd"
	if _, err := o.Vsctl("add-br", br, "--", "set", "bridge", br, "datapath_type=netdev",
		"protocols=OpenFlow10,OpenFlow13,OpenFlow15", "fail_mode=secure"); err != nil {
		t.Fatal(err)
	}
	if err := o.WaitForBridge(br); err != nil {
		t.Fatal(err)
	}
	out := ServicePort(manyNode(), ServicePortInput{Port: manyPort(false, model.TCP), GroupID: 1,
		Endpoints: manyEndpoints(endpoints, false), SubGroupIDs: subIDs(SubGroups(endpoints))})
	if len(out.Groups) != 4 {
		t.Fatalf("want 3 sub-groups and the first level, got %d groups", len(out.Groups))
	}
	var ops []of.Op
	sub := map[string]int{} // endpoint → its sub-group
	// diagonal holds bucket j of sub-group j: with the first level's hash seed, a connection
	// that chose sub-group j (bucket j of the first level) would favour them.
	diagonal := map[string]bool{}
	for j, g := range out.Groups {
		ops = append(ops, of.Op{Kind: of.AddGroup, Group: g})
		for i, b := range g.Buckets {
			if m := natDst.FindStringSubmatch(of.FormatActions(b.Actions)); m != nil {
				sub[m[1]] = j
				diagonal[m[1]] = i == j
			}
		}
	}
	ops = append(ops, of.Op{Kind: of.AddFlow, Flow: &of.Flow{Table: 0, Priority: 100,
		Match: of.Match{EthType: of.EthTypeIP, IPProto: of.ProtoTCP}, Actions: []of.Action{of.GroupAction{ID: 1}}}})
	if err := ofctl.New(o.MgmtSocket(br)).Apply(context.Background(), ops); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	perSub := make([]int, 3)
	start := time.Now()
	for i := range tuples {
		flow := fmt.Sprintf("in_port=LOCAL,tcp,nw_src=10.1.%d.%d,nw_dst=10.96.0.10,tp_src=%d,tp_dst=80",
			i%251, i%241, 1024+i)
		tr, err := o.Trace(br, flow)
		if err != nil {
			t.Fatal(err)
		}
		m := natDst.FindStringSubmatch(tr)
		if m == nil {
			t.Fatalf("trace of %s chose no endpoint:\n%s", flow, tr)
		}
		counts[m[1]]++
		perSub[sub[m[1]]]++
	}
	expect := float64(tuples) / endpoints
	chi2, lo, hi, diag := 0.0, tuples, 0, 0
	for ip := range sub {
		c := counts[ip]
		if diagonal[ip] {
			diag += c
		}
		chi2 += (float64(c) - expect) * (float64(c) - expect) / expect
		lo, hi = min(lo, c), max(hi, c)
	}
	// χ² over 1535 degrees of freedom: mean 1535, standard deviation √3070 ≈ 55; five of them
	// is far beyond chance.
	dof := float64(endpoints - 1)
	t.Logf("%d tuples in %v: %d of %d endpoints chosen, per sub-group %v, χ²=%.0f (dof %.0f), min %d max %d, bucket j of sub-group j %d (uniform: %.1f)",
		tuples, time.Since(start).Round(time.Millisecond), len(counts), endpoints, perSub, chi2, dof, lo, hi, diag, 3*expect)
	// Same seed at both levels: bucket j of sub-group j is the best of 512 given that j was the
	// best of 3, so 3 × as likely; independent levels: as likely as any other.
	if float64(diag) > 2*3*expect {
		t.Errorf("bucket j of sub-group j got %d tuples, %.1f expected: the levels' choices are correlated", diag, 3*expect)
	}
	if len(counts) < endpoints*9/10 {
		t.Errorf("only %d of %d endpoints chosen", len(counts), endpoints)
	}
	if chi2 > dof+5*math.Sqrt(2*dof) {
		t.Errorf("χ² %.0f: the choice is not uniform over the endpoints", chi2)
	}
	for j, c := range perSub {
		if share := float64(c) / tuples; share < 0.3 || share > 0.37 {
			t.Errorf("sub-group %d got %.1f %% of the tuples", j, 100*share)
		}
	}
}
