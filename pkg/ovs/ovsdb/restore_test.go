package ovsdb_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFlowRestoreWait(t *testing.T) {
	o, c := setup(t)
	ctx := testContext(t)

	on, err := c.FlowRestoreWait(ctx)
	require.NoError(t, err)
	require.False(t, on, "a fresh database has no flow-restore-wait")

	vsctl(t, o, "set", "Open_vSwitch", ".", "other_config:other-key=kept")
	require.NoError(t, c.SetFlowRestoreWait(ctx, true))
	require.Equal(t, "true", vsctl(t, o, "get", "Open_vSwitch", ".", "other_config:flow-restore-wait"))
	on, err = c.FlowRestoreWait(ctx)
	require.NoError(t, err)
	require.True(t, on)
	// Setting it twice is idempotent.
	require.NoError(t, c.SetFlowRestoreWait(ctx, true))
	require.Equal(t, "true", vsctl(t, o, "get", "Open_vSwitch", ".", "other_config:flow-restore-wait"))

	// Clearing removes the key, not only its value, and keeps the others.
	require.NoError(t, c.SetFlowRestoreWait(ctx, false))
	require.Equal(t, "{other-key=kept}", vsctl(t, o, "get", "Open_vSwitch", ".", "other_config"))
	on, err = c.FlowRestoreWait(ctx)
	require.NoError(t, err)
	require.False(t, on)
	require.NoError(t, c.SetFlowRestoreWait(ctx, false), "clearing an absent key")

	// Written by someone else (start-ovs), it is seen; a value other than "true" is off, as
	// ovs-vswitchd reads it.
	vsctl(t, o, "set", "Open_vSwitch", ".", "other_config:flow-restore-wait=true")
	on, err = c.FlowRestoreWait(ctx)
	require.NoError(t, err)
	require.True(t, on)
	vsctl(t, o, "set", "Open_vSwitch", ".", "other_config:flow-restore-wait=false")
	on, err = c.FlowRestoreWait(ctx)
	require.NoError(t, err)
	require.False(t, on)
	require.NoError(t, c.SetFlowRestoreWait(ctx, false))
	require.Equal(t, "{other-key=kept}", vsctl(t, o, "get", "Open_vSwitch", ".", "other_config"))
}
