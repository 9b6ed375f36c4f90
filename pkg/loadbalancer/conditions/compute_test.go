package conditions

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var (
	t0 = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 = metav1.NewTime(t0.Add(time.Minute))
)

func cond(typ string, status metav1.ConditionStatus, reason, msg string, gen int64, at metav1.Time) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen, LastTransitionTime: at}
}

func TestApplyStates(t *testing.T) {
	etp := Unmet{FeatureExternalTrafficPolicy, "ipMode Proxy does not preserve the client source IP"}
	aff := Unmet{FeatureSessionAffinity, "ipMode Proxy hides the client IP"}
	complete := func(gen int64) metav1.Condition {
		return cond(TypeProvisioning, metav1.ConditionFalse, ReasonComplete, "no change in progress", gen, t0)
	}
	for _, tc := range []struct {
		name string
		v    Verdict
		want []metav1.Condition
	}{{
		name: "serving",
		v:    Verdict{Generation: 2, Ready: []string{"10.0.0.5 (VIP)", "fd00::5 (VIP)"}},
		want: []metav1.Condition{
			cond(TypeServing, metav1.ConditionTrue, ReasonServing, "serving 10.0.0.5 (VIP), fd00::5 (VIP)", 2, t0),
			complete(2),
		},
	}, {
		name: "provisioning before the first address is ready",
		v:    Verdict{Generation: 1, Pending: []string{"10.0.0.5: waiting for a Ready node"}},
		want: []metav1.Condition{
			cond(TypeServing, metav1.ConditionFalse, ReasonProvisioning, "10.0.0.5: waiting for a Ready node", 1, t0),
			cond(TypeProvisioning, metav1.ConditionTrue, ReasonProvisioning, "10.0.0.5: waiting for a Ready node", 1, t0),
		},
	}, {
		name: "serving while another change is applied",
		v:    Verdict{Generation: 1, Ready: []string{"10.0.0.5 (VIP)"}, Pending: []string{"fd00::5: waiting"}},
		want: []metav1.Condition{
			cond(TypeServing, metav1.ConditionTrue, ReasonServing, "serving 10.0.0.5 (VIP)", 1, t0),
			cond(TypeProvisioning, metav1.ConditionTrue, ReasonProvisioning, "fd00::5: waiting", 1, t0),
		},
	}, {
		name: "unsupported drops degraded and pending",
		v: Verdict{Generation: 3, Unsupported: []Unmet{etp, {FeatureLoadBalancerIP, "1.2.3.4 is in no pool"}},
			Pending: []string{"x"}, Degraded: []Unmet{aff}},
		want: []metav1.Condition{
			cond(TypeServing, metav1.ConditionFalse, ReasonUnsupported,
				"unsupported: ExternalTrafficPolicy: ipMode Proxy does not preserve the client source IP; LoadBalancerIP: 1.2.3.4 is in no pool", 3, t0),
			complete(3),
		},
	}, {
		name: "infrastructure",
		v:    Verdict{Generation: 1, Infrastructure: []string{`pool "p" has no free IPv4 address`}},
		want: []metav1.Condition{
			cond(TypeServing, metav1.ConditionFalse, ReasonInfrastructure, `pool "p" has no free IPv4 address`, 1, t0),
			complete(1),
		},
	}, {
		name: "no address and nothing pending",
		v:    Verdict{Generation: 1},
		want: []metav1.Condition{
			cond(TypeServing, metav1.ConditionFalse, ReasonProvisioning, "waiting for an address", 1, t0),
			complete(1),
		},
	}, {
		name: "degraded with one reason",
		v:    Verdict{Generation: 1, Ready: []string{"192.0.2.1 (Proxy)"}, Degraded: []Unmet{etp}},
		want: []metav1.Condition{
			cond(TypeServing, metav1.ConditionTrue, ReasonServing, "serving 192.0.2.1 (Proxy)", 1, t0),
			complete(1),
			cond(TypeDegraded, metav1.ConditionTrue, ReasonExternalTrafficPolicyNotSupported, etp.String(), 1, t0),
		},
	}, {
		name: "degraded with several reasons",
		v:    Verdict{Generation: 1, Ready: []string{"192.0.2.1 (Proxy)"}, Degraded: []Unmet{etp, aff}},
		want: []metav1.Condition{
			cond(TypeServing, metav1.ConditionTrue, ReasonServing, "serving 192.0.2.1 (Proxy)", 1, t0),
			complete(1),
			cond(TypeDegraded, metav1.ConditionTrue, ReasonMultiple, etp.String()+"; "+aff.String(), 1, t0),
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var conds []metav1.Condition
			require.True(t, Apply(&conds, tc.v, t0))
			require.Empty(t, cmp.Diff(tc.want, conds))
			// Applying the same verdict again changes nothing.
			require.False(t, Apply(&conds, tc.v, t1))
			require.Empty(t, cmp.Diff(tc.want, conds))
		})
	}
}

func TestApplyTransitionsMoveTimeOnlyOnStatusChange(t *testing.T) {
	other := cond("example.com/Other", metav1.ConditionTrue, "Fine", "", 1, t0)
	conds := []metav1.Condition{other}
	provisioning := Verdict{Generation: 1, Pending: []string{"waiting for node"}}
	require.True(t, Apply(&conds, provisioning, t0))

	// Provisioning -> Infrastructure: Serving stays False, so its time stays;
	// Provisioning goes True -> False and moves.
	require.True(t, Apply(&conds, Verdict{Generation: 1, Infrastructure: []string{"exhausted"}}, t1))
	requireCond(t, conds, TypeServing, metav1.ConditionFalse, ReasonInfrastructure, 1, t0)
	requireCond(t, conds, TypeProvisioning, metav1.ConditionFalse, ReasonComplete, 1, t1)

	// -> Serving at generation 2: Serving moves, generation follows.
	t2 := metav1.NewTime(t1.Add(time.Minute))
	require.True(t, Apply(&conds, Verdict{Generation: 2, Ready: []string{"a"}}, t2))
	requireCond(t, conds, TypeServing, metav1.ConditionTrue, ReasonServing, 2, t2)
	requireCond(t, conds, TypeProvisioning, metav1.ConditionFalse, ReasonComplete, 2, t1)

	// Degraded appears, then disappears.
	t3 := metav1.NewTime(t2.Add(time.Minute))
	deg := Verdict{Generation: 2, Ready: []string{"a"}, Degraded: []Unmet{{FeatureIPFamilies, "no IPv6 pool"}}}
	require.True(t, Apply(&conds, deg, t3))
	requireCond(t, conds, TypeDegraded, metav1.ConditionTrue, ReasonIPFamiliesNotSupported, 2, t3)
	requireCond(t, conds, TypeServing, metav1.ConditionTrue, ReasonServing, 2, t2)
	require.True(t, Apply(&conds, Verdict{Generation: 2, Ready: []string{"a"}}, t3))
	require.Nil(t, findCond(conds, TypeDegraded))

	// Remove keeps foreign conditions.
	require.True(t, Remove(&conds))
	require.Equal(t, []metav1.Condition{other}, conds)
	require.False(t, Remove(&conds))
}

func requireCond(t *testing.T, conds []metav1.Condition, typ string, status metav1.ConditionStatus, reason string, gen int64, at metav1.Time) {
	t.Helper()
	c := findCond(conds, typ)
	require.NotNil(t, c, "condition %s missing", typ)
	require.Equal(t, status, c.Status, typ)
	require.Equal(t, reason, c.Reason, typ)
	require.Equal(t, gen, c.ObservedGeneration, typ)
	require.True(t, at.Equal(&c.LastTransitionTime), "%s: lastTransitionTime %v, want %v", typ, c.LastTransitionTime, at)
}

func findCond(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

func TestParseFeatures(t *testing.T) {
	got := ParseFeatures(" IPFamilies,Ports ,, IPFamilies,Bogus")
	require.Equal(t, []Feature{FeatureIPFamilies, FeaturePorts, "Bogus"}, got)
	require.False(t, Feature("Bogus").Known())
	require.True(t, FeaturePorts.Known())
	require.Equal(t, "IPFamilies,Ports,Bogus", FormatFeatures(got))
	require.Nil(t, ParseFeatures(""))
	for _, f := range AllFeatures() {
		if f == FeatureLoadBalancerSourceRanges {
			require.Empty(t, f.DegradedReason())
		} else {
			require.NotEmpty(t, f.DegradedReason(), f)
		}
	}
}
