package conditions

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Verdict is what a provider concluded about one Service in one sync.
// Lists hold human-readable items that end up in condition messages.
type Verdict struct {
	// Generation is the metadata.generation the verdict is about.
	Generation int64
	// Unsupported lists what makes the provider refuse the Service; any
	// entry gives Serving=False/Unsupported.
	Unsupported []Unmet
	// Infrastructure lists failures such as an exhausted pool; any entry
	// (and no Unsupported) gives Serving=False/Infrastructure.
	Infrastructure []string
	// Ready lists the addresses that serve traffic, e.g. "10.0.0.5 (VIP)".
	Ready []string
	// Pending lists changes still being applied; any entry gives
	// Provisioning=True, and Serving=False/Provisioning while Ready is empty.
	Pending []string
	// Degraded lists features the provider knowingly does not deliver
	// although the Service uses them. Each must have a DegradedReason.
	Degraded []Unmet
}

// Apply sets the three KEP-4631 conditions in conds from v, with the
// semantics of meta.SetStatusCondition: lastTransitionTime becomes now
// only when a condition's status changes. LoadBalancerDegraded is removed
// when nothing is degraded. It reports whether conds changed.
func Apply(conds *[]metav1.Condition, v Verdict, now metav1.Time) bool {
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) bool {
		return meta.SetStatusCondition(conds, metav1.Condition{
			Type: typ, Status: status, Reason: reason, Message: msg,
			ObservedGeneration: v.Generation, LastTransitionTime: now,
		})
	}
	changed := false
	switch {
	case len(v.Unsupported) > 0:
		changed = set(TypeServing, metav1.ConditionFalse, ReasonUnsupported, "unsupported: "+joinUnmet(v.Unsupported))
	case len(v.Infrastructure) > 0:
		changed = set(TypeServing, metav1.ConditionFalse, ReasonInfrastructure, strings.Join(v.Infrastructure, "; "))
	case len(v.Ready) == 0:
		msg := "waiting for an address"
		if len(v.Pending) > 0 {
			msg = strings.Join(v.Pending, "; ")
		}
		changed = set(TypeServing, metav1.ConditionFalse, ReasonProvisioning, msg)
	default:
		changed = set(TypeServing, metav1.ConditionTrue, ReasonServing, "serving "+strings.Join(v.Ready, ", "))
	}
	if len(v.Pending) > 0 && len(v.Unsupported) == 0 {
		changed = set(TypeProvisioning, metav1.ConditionTrue, ReasonProvisioning, strings.Join(v.Pending, "; ")) || changed
	} else {
		changed = set(TypeProvisioning, metav1.ConditionFalse, ReasonComplete, "no change in progress") || changed
	}
	degraded := v.Degraded
	if len(v.Unsupported) > 0 {
		degraded = nil // nothing was built
	}
	switch len(degraded) {
	case 0:
		changed = meta.RemoveStatusCondition(conds, TypeDegraded) || changed
	case 1:
		changed = set(TypeDegraded, metav1.ConditionTrue, degraded[0].Feature.DegradedReason(), degraded[0].String()) || changed
	default:
		changed = set(TypeDegraded, metav1.ConditionTrue, ReasonMultiple, joinUnmet(degraded)) || changed
	}
	return changed
}

// Remove deletes the three KEP-4631 conditions from conds, leaving others
// alone, and reports whether conds changed.
func Remove(conds *[]metav1.Condition) bool {
	changed := false
	for _, t := range []string{TypeServing, TypeProvisioning, TypeDegraded} {
		changed = meta.RemoveStatusCondition(conds, t) || changed
	}
	return changed
}

func joinUnmet(us []Unmet) string {
	parts := make([]string, len(us))
	for i, u := range us {
		parts[i] = u.String()
	}
	return strings.Join(parts, "; ")
}
