// Package conditions defines the Service status conditions of KEP-4631
// ("LoadBalancer Service Status Improvements") with the KEP's exact type
// and reason strings, the "required features" a Service (or an e2e test)
// can ask for, and the computation that turns a provider's verdict about a
// Service into those conditions.
//
// k8s.io/api has none of these constants yet, so they live here; the
// annotation that carries required features stands in for the API field
// the KEP proposes.
package conditions

import (
	"fmt"
	"slices"
	"strings"
)

// Condition types of KEP-4631.
const (
	// TypeServing is True when the load balancer serves the Service.
	TypeServing = "LoadBalancerServing"
	// TypeProvisioning is True while the provider applies a change.
	TypeProvisioning = "LoadBalancerProvisioning"
	// TypeDegraded is True when the provider knowingly built something that
	// does not fully match the Service. It is absent otherwise.
	TypeDegraded = "LoadBalancerDegraded"
)

// Reasons of the LoadBalancerServing condition.
const (
	ReasonServing        = "Serving"        // Status=True
	ReasonProvisioning   = "Provisioning"   // Status=False: the first address is not ready yet
	ReasonUnsupported    = "Unsupported"    // Status=False: the provider refuses the Service
	ReasonInfrastructure = "Infrastructure" // Status=False: a failure, e.g. an exhausted pool
)

// Reasons of the LoadBalancerProvisioning condition. Status=True uses
// ReasonProvisioning.
const (
	ReasonComplete = "Complete" // Status=False
)

// Reasons of the LoadBalancerDegraded condition (always Status=True).
const (
	ReasonIPFamiliesNotSupported            = "IPFamiliesNotSupported"
	ReasonPortsNotSupported                 = "PortsNotSupported"
	ReasonLoadBalancerIPNotSupported        = "LoadBalancerIPNotSupported"
	ReasonSessionAffinityNotSupported       = "SessionAffinityNotSupported"
	ReasonExternalTrafficPolicyNotSupported = "ExternalTrafficPolicyNotSupported"
	ReasonMultiple                          = "Multiple"
)

// Feature is a load balancer feature a Service can require.
type Feature string

// Features a Service can require (KEP-4631).
const (
	FeatureIPFamilies               Feature = "IPFamilies"
	FeaturePorts                    Feature = "Ports"
	FeatureSessionAffinity          Feature = "SessionAffinity"
	FeatureLoadBalancerIP           Feature = "LoadBalancerIP"
	FeatureExternalTrafficPolicy    Feature = "ExternalTrafficPolicy"
	FeatureLoadBalancerSourceRanges Feature = "LoadBalancerSourceRanges"
)

// AllFeatures lists every known Feature.
func AllFeatures() []Feature {
	return []Feature{
		FeatureIPFamilies, FeaturePorts, FeatureSessionAffinity,
		FeatureLoadBalancerIP, FeatureExternalTrafficPolicy, FeatureLoadBalancerSourceRanges,
	}
}

// Known reports whether f is one of AllFeatures.
func (f Feature) Known() bool { return slices.Contains(AllFeatures(), f) }

// DegradedReason is the Degraded reason matching f, "" for a feature that
// has none (LoadBalancerSourceRanges).
func (f Feature) DegradedReason() string {
	switch f {
	case FeatureIPFamilies:
		return ReasonIPFamiliesNotSupported
	case FeaturePorts:
		return ReasonPortsNotSupported
	case FeatureSessionAffinity:
		return ReasonSessionAffinityNotSupported
	case FeatureLoadBalancerIP:
		return ReasonLoadBalancerIPNotSupported
	case FeatureExternalTrafficPolicy:
		return ReasonExternalTrafficPolicyNotSupported
	}
	return ""
}

// ParseFeatures parses a comma-separated list of feature names (spaces
// around names are ignored, duplicates collapse, order is kept). Unknown
// names are returned too, as Features for which Known is false.
func ParseFeatures(s string) []Feature {
	var out []Feature
	for _, part := range strings.Split(s, ",") {
		f := Feature(strings.TrimSpace(part))
		if f != "" && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// FormatFeatures is the inverse of ParseFeatures.
func FormatFeatures(fs []Feature) string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = string(f)
	}
	return strings.Join(parts, ",")
}

// Unmet is a feature the provider cannot deliver for a Service, and why.
type Unmet struct {
	Feature Feature
	Why     string
}

func (u Unmet) String() string { return fmt.Sprintf("%s: %s", u.Feature, u.Why) }
