package config

import (
	"time"
)

// Flow budgets and the flow-restore bound (antreaProxy.maxFlowsPerService, maxFlows,
// flowRestoreTimeout); docs/design/failure-handling.md, "Flow budget".
const (
	// DefaultMaxFlowsPerService is the most OpenFlow entries (flows and group buckets, as the
	// proxier estimates them before building anything) one Service may cost: 5,000 endpoints on
	// 20 ports, or 1,000 ports × 33 addresses with externalTrafficPolicy=Local; at the measured
	// 0.3-0.9 KB retained and 1.5-1.7 KB held at the peak per entry
	// (BenchmarkBudgetBytesPerEntry), at most ≈ 90 MB retained and ≈ 175 MB at the peak.
	DefaultMaxFlowsPerService = 100000
	// DefaultMaxFlows is the most the admitted Services may cost together: ≈ 2.8 × the 360,000
	// entries of 30,000 Services × 10 endpoints, at most ≈ 0.9 GB retained by the proxier.
	DefaultMaxFlows = 1000000
	// DefaultFlowRestoreTimeout is how long the agent waits, once the gateway and pod flows
	// are in, for the proxier's first successful sync before it clears flow-restore-wait anyway.
	DefaultFlowRestoreTimeout = 30 * time.Second
)

// budgetDefaults sets the flow budgets and the flow-restore bound left at 0.
func (p *AntreaProxyConfig) budgetDefaults() {
	if p.MaxFlowsPerService == 0 {
		p.MaxFlowsPerService = DefaultMaxFlowsPerService
	}
	if p.MaxFlows == 0 {
		p.MaxFlows = DefaultMaxFlows
	}
	setDuration(&p.FlowRestoreTimeout, DefaultFlowRestoreTimeout)
}

// validateBudget reports every problem of the flow budgets and the flow-restore bound.
func (p *AntreaProxyConfig) validateBudget(path string) []error {
	var errs []error
	if p.MaxFlowsPerService < 0 {
		errs = append(errs, fieldErr(path+".maxFlowsPerService", "must be > 0 (0 or omitted: %d), got %d", DefaultMaxFlowsPerService, p.MaxFlowsPerService))
	}
	if p.MaxFlows < 0 {
		errs = append(errs, fieldErr(path+".maxFlows", "must be > 0 (0 or omitted: %d), got %d", DefaultMaxFlows, p.MaxFlows))
	} else if p.MaxFlows > 0 && p.MaxFlowsPerService > p.MaxFlows {
		errs = append(errs, fieldErr(path+".maxFlowsPerService", "%d must be <= maxFlows (%d)", p.MaxFlowsPerService, p.MaxFlows))
	}
	if p.FlowRestoreTimeout.Duration < 0 {
		errs = append(errs, fieldErr(path+".flowRestoreTimeout", "must be > 0 (0 or omitted: %v), got %v", DefaultFlowRestoreTimeout, p.FlowRestoreTimeout.Duration))
	}
	return errs
}
