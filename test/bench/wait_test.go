//go:build bench

package bench

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeProxy is a proxy's gauges and rules as waitProgrammed sees them, one state per poll: the
// state of poll i is states[min(i, len-1)].
type fakeProxy struct {
	states []fakeState
	polls  int
	checks []float64 // the sync (last) of every rules check
}

type fakeState struct {
	last, queued float64
	// rules is what a check of the rules answers during this state: "ok", "missing" or "error".
	rules string
}

func (f *fakeProxy) state() fakeState { return f.states[min(f.polls, len(f.states)-1)] }

func (f *fakeProxy) syncs(context.Context) (float64, float64, error) {
	st := f.state()
	f.polls++
	return st.last, st.queued, nil
}

func (f *fakeProxy) programmed(context.Context, []benchService) (bool, string, error) {
	st := f.states[min(f.polls-1, len(f.states)-1)]
	f.checks = append(f.checks, st.last)
	switch st.rules {
	case "ok":
		return true, "", nil
	case "error":
		return false, "", errors.New("could not list the rules")
	}
	return false, "service s1 missing", nil
}

// TestWaitProgrammed: a sync from before the start and one followed by queued changes do not
// count, a sync whose rules were found incomplete is checked once only, a check that could not
// look is repeated on the same sync, and the time returned is the sync's own end, not the poll's.
func TestWaitProgrammed(t *testing.T) {
	start := time.Unix(1000, 0)
	f := &fakeProxy{states: []fakeState{
		{last: 999, queued: 998},        // the previous process's sync: before start
		{last: 1000.5, queued: 1000.75}, // changes queued after that sync
		{last: 1001.25, queued: 1000.75, rules: "missing"},
		{last: 1001.25, queued: 1000.75, rules: "ok"}, // same sync: not checked again
		{last: 1002.5, queued: 1000.75, rules: "error"},
		{last: 1002.5, queued: 1000.75, rules: "ok"},
	}}
	at, err := waitProgrammed(f.syncs, f.programmed, nil, start, time.Minute, time.Millisecond)
	require.NoError(t, err)
	require.Equal(t, time.Unix(1002, 5e8), at)
	require.Equal(t, []float64{1001.25, 1002.5, 1002.5}, f.checks)
}

// TestWaitProgrammedTimeout: a proxy that never programs everything fails with what its last
// check found missing.
func TestWaitProgrammedTimeout(t *testing.T) {
	f := &fakeProxy{states: []fakeState{{last: 1001, queued: 1000, rules: "missing"}, {last: 1002, queued: 1000, rules: "missing"}}}
	_, err := waitProgrammed(f.syncs, f.programmed, nil, time.Unix(1000, 0), 50*time.Millisecond, time.Millisecond)
	require.ErrorContains(t, err, "not within")
	require.ErrorContains(t, err, "1002.000 verified")
	require.Equal(t, []float64{1001, 1002}, f.checks)
}
