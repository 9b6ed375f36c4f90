package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRateLimitDefaults(t *testing.T) {
	got := RateLimitConfig{RejectSources: 64}.WithDefaults()
	require.Equal(t, RateLimitConfig{RejectMeterRate: 4000, RejectMeterBurst: 2000, RejectMeters: 16, RejectRate: 1000, RejectBurst: 500,
		RejectSourceRate: 250, RejectSourceBurst: 125, RejectSources: 64, AffinityFlowsPerService: 10000, AffinityFlowsTotal: 100000}, got)
	require.Empty(t, RateLimitConfig{}.validate("r"))
}

// TestRateLimitValidateReportsEveryProblem: each bad value, and each inconsistent pair, is one
// error naming its field.
func TestRateLimitValidateReportsEveryProblem(t *testing.T) {
	errs := RateLimitConfig{RejectMeterRate: -1, RejectMeters: 300, RejectSourceRate: 2000, RejectRate: 10,
		AffinityFlowsPerService: 20, AffinityFlowsTotal: 10}.validate("antreaProxy.rateLimits")
	var msgs []string
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	all := strings.Join(msgs, "\n")
	for _, want := range []string{"rateLimits.rejectMeterRate: must be in [1, 10000000], got -1", "rateLimits.rejectMeters: must be in [1, 256], got 300",
		"rateLimits.rejectSourceRate: 2000 exceeds rejectRate (10)", "rateLimits.rejectMeters: 300 is not a power of two", "rateLimits.affinityFlowsPerService: 20 exceeds affinityFlowsTotal (10)"} {
		require.Contains(t, all, want)
	}
	require.Len(t, errs, 5, all)
	require.Contains(t, RateLimitConfig{RejectMeterRate: 10, RejectMeters: 16}.validate("r")[0].Error(), "below rejectMeters")
	require.Contains(t, RateLimitConfig{RejectMeters: 12}.validate("r")[0].Error(), "rejectMeters: 12 is not a power of two")
}

func TestRateLimitParse(t *testing.T) {
	c, err := ParseWithEnv([]byte("antreaProxy:\n  rateLimits:\n    rejectMeterRate: 200\n    affinityFlowsTotal: 50000\n"), fakeEnv("n", "h"))
	require.NoError(t, err)
	require.Equal(t, RateLimitConfig{RejectMeterRate: 200, AffinityFlowsTotal: 50000}, c.AntreaProxy.RateLimits)
	require.Equal(t, 50000, c.AntreaProxy.RateLimits.WithDefaults().AffinityFlowsTotal)
	_, err = ParseWithEnv([]byte("antreaProxy:\n  rateLimits:\n    rejectMeters: 0\n    rejectSources: -3\n"), fakeEnv("n", "h"))
	require.ErrorContains(t, err, "antreaProxy.rateLimits.rejectSources")
}
