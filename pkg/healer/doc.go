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
// A check compares OVS with what the owners installed, so that an external `ovs-ofctl
// del-flows` heals. With a Counter that reports table statistics (openflow.TableCounter) a
// check is one table statistics request, which OVS answers from a counter per table whatever
// the number of flows: each table's count is compared with what the writers that count per
// table (Options.Tables, TableCounts) installed there plus the surplus recorded at the last
// full check (the other owners' and foreign flows). Only when that differs, when a writer
// cannot tell, and once FullCheckInterval passed does every owner Verify its flows
// (cookie-filtered flow counts, for which OVS walks the flows), and those that mismatch replay.
//
// When a check runs is the schedule's: every CheckInterval (1 s), unless a ChangeFeed reports
// the changes other writers make (an OpenFlow flow monitor on the agent's own connection,
// native.FlowWatch). While it does, each report is checked at once (at most once per
// CheckInterval), a check that replayed is confirmed CheckInterval later, and otherwise a
// check runs every WatchedCheckInterval (30 s): an agent at rest then asks OVS twice a minute
// instead of sixty times, and a foreign change heals without waiting for a tick.
package healer
