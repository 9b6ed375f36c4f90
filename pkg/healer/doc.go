// Package healer keeps what the agent installed in Open vSwitch installed.
//
// The healer decides when to check and when to replay; what is installed, and how to verify and
// replay it, is the owners'. The agent's owners are the reject meters, the gateway's host side
// and the bridge's reconciler (pkg/reconciler), which holds the flows and groups of every writer
// of the bridge (the gateway, the CNI server's pods, the proxier). The Healer replays every owner, in order, when the OpenFlow connection monitor reports
// that ovs-vswitchd came back after a loss (a restarted vswitchd holds no flows), retrying the
// owners that fail with backoff until all succeed, and then runs Options.AfterReplayAll (the
// agent clears other_config:flow-restore-wait there).
//
// Every CheckInterval it checks OVS against what the owners installed, so that an external
// `ovs-ofctl del-flows` heals. With a Counter that reports table statistics
// (openflow.TableCounter) a check is one table statistics request, which OVS answers from a
// counter per table whatever the number of flows: each table's count is compared with what
// the TableOwners installed there plus the surplus recorded at the last full check (the other
// owners' and foreign flows). Only when that differs, when an owner cannot tell, and every
// FullCheckEvery checks does every owner Verify its flows (cookie-filtered flow counts, for
// which OVS walks the flows), and those that mismatch replay.
package healer
