package framework

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// attempts builds one attempt per character of pattern ('.' success, 'x' failure), started 50ms
// apart from t0 and each lasting 10ms.
func attempts(t0 time.Time, pattern string) []ProbeAttempt {
	var out []ProbeAttempt
	for i, c := range pattern {
		start := t0.Add(time.Duration(i) * 50 * time.Millisecond)
		a := ProbeAttempt{Start: start, End: start.Add(10 * time.Millisecond)}
		if c == 'x' {
			a.Err = errors.New("refused")
		}
		out = append(out, a)
	}
	return out
}

func TestSummarize(t *testing.T) {
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * 50 * time.Millisecond) }

	s := Summarize(attempts(t0, "....."), t0)
	require.Equal(t, 0, s.Failed)
	require.True(t, s.Recovered)
	require.Zero(t, s.Recovery)
	require.Zero(t, s.LongestOutage)

	// Two outages: 2 and 4 attempts; measured from attempt 4, recovery is at the end of
	// attempt 10, the first success after the last failure.
	s = Summarize(attempts(t0, "..xx..xxxx.."), at(4))
	require.Equal(t, 6, s.Failed)
	require.Equal(t, 12, s.Attempts)
	require.True(t, s.Recovered)
	require.False(t, s.OutageOngoing)
	require.Equal(t, 4*50*time.Millisecond+10*time.Millisecond, s.LongestOutage)
	require.Equal(t, 6*50*time.Millisecond+10*time.Millisecond, s.Recovery)
	require.Equal(t, at(9), s.LastFailure)

	// Never recovered: the outage lasts to the end of the last attempt.
	s = Summarize(attempts(t0, "..xxx"), at(2))
	require.False(t, s.Recovered)
	require.True(t, s.OutageOngoing)
	require.Equal(t, 2*50*time.Millisecond+10*time.Millisecond, s.LongestOutage)
	require.Contains(t, s.String(), "never recovered")

	// Recovery is never negative: the last failure was before the reference instant.
	s = Summarize(attempts(t0, "x...."), at(3))
	require.True(t, s.Recovered)
	require.Zero(t, s.Recovery)

	// Order of the input does not matter.
	in := attempts(t0, "..xx..")
	in[0], in[5] = in[5], in[0]
	require.Equal(t, 2, Summarize(in, t0).Failed)
	require.Equal(t, 2*50*time.Millisecond+10*time.Millisecond, Summarize(in, t0).LongestOutage)
}
