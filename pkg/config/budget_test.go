package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBudgetDefaults(t *testing.T) {
	c := validConfig()
	c.AntreaProxy.MaxFlowsPerService, c.AntreaProxy.MaxFlows, c.AntreaProxy.FlowRestoreTimeout = 0, 0, Duration{}
	c.Defaults()
	require.Equal(t, DefaultMaxFlowsPerService, c.AntreaProxy.MaxFlowsPerService)
	require.Equal(t, DefaultMaxFlows, c.AntreaProxy.MaxFlows)
	require.Equal(t, DefaultFlowRestoreTimeout, c.AntreaProxy.FlowRestoreTimeout.Duration)
	require.NoError(t, c.Validate())
	require.LessOrEqual(t, DefaultMaxFlowsPerService, DefaultMaxFlows)
}

// TestValidateBudgetReportsEverything: negative budgets and timeout, and a per-Service budget
// over the node's, are each reported.
func TestValidateBudgetReportsEverything(t *testing.T) {
	c := validConfig()
	c.AntreaProxy.MaxFlowsPerService, c.AntreaProxy.MaxFlows = -1, -2
	c.AntreaProxy.FlowRestoreTimeout = Duration{-time.Second}
	err := c.Validate()
	require.Error(t, err)
	for _, want := range []string{"antreaProxy.maxFlowsPerService: must be > 0", "antreaProxy.maxFlows: must be > 0",
		"antreaProxy.flowRestoreTimeout: must be > 0"} {
		require.Contains(t, err.Error(), want)
	}
	c = validConfig()
	c.AntreaProxy.MaxFlowsPerService, c.AntreaProxy.MaxFlows = 10, 5
	require.ErrorContains(t, c.Validate(), "antreaProxy.maxFlowsPerService: 10 must be <= maxFlows (5)")
}
