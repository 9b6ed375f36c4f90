// Package healer keeps what the agent installed in Open vSwitch installed.
//
// Every writer of the bridge (the gateway flows, the CNI server's pod flows, the proxier) is an
// Owner. The Healer replays every owner, in order, when the OpenFlow connection monitor reports
// that ovs-vswitchd came back after a loss (a restarted vswitchd holds no flows), retrying the
// owners that fail with backoff until all succeed, and then runs Options.AfterReplayAll (the
// agent clears other_config:flow-restore-wait there). Every CheckInterval it asks each owner to
// Verify what OVS holds against what the owner believes it installed (cheap flow counts) and
// replays only the owners that mismatch, so that an external `ovs-ofctl del-flows` heals.
package healer
