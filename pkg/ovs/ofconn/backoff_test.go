package ofconn

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBackoffDoublesUpToMaxAndResets(t *testing.T) {
	b := Backoff{Min: time.Millisecond, Max: 3 * time.Millisecond}
	var waits []time.Duration
	for i := 0; i < 4; i++ {
		waits = append(waits, b.Current())
		require.True(t, b.Wait(context.Background()))
	}
	require.Equal(t, []time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond, 3 * time.Millisecond}, waits)
	b.Reset()
	require.Equal(t, time.Millisecond, b.Current())

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	long := Backoff{Min: time.Hour}
	require.False(t, long.Wait(ctx), "an ended context ends the wait")
}
