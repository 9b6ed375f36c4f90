// Package ofconn is the project's one OpenFlow connection to an Open vSwitch bridge, written
// with encoding/binary. Every OpenFlow socket of the agent is one of its Conns: the native
// bridge backend's (pkg/ovs/openflow/native, OpenFlow 1.5, which encodes its own bundles of
// flow, group and meter mods and sends them here), the connection monitor's (with the ofctl
// backend) and the reject responder's (pkg/proxy/reject, OpenFlow 1.3: packet-in,
// packet-out).
//
// A Conn speaks one version, Options.Version (1.3 by default, or 1.5), and implements:
//   - hello and version negotiation (the version announced with a version bitmap; a peer that
//     does not offer it is a clear error);
//   - echo request/reply in both directions: the switch's requests are answered, and the
//     keepalive sends one when the connection has been quiet for EchoInterval and ends the
//     connection when no reply comes within EchoTimeout (unless a Hold is in force: a large
//     request in flight has its own deadline);
//   - features request/reply (the datapath ID);
//   - requests and replies matched by xid (Expect, Await, Request, Barrier, Echo), multipart
//     replies gathered part by part (Multipart), the switch's errors about a range of xids
//     that no request waits for collected (CollectErrors: the messages of a bundle), and
//     every waiter failed with the connection's error when it ends (a reset mid-request);
//   - unless Options.IgnorePacketIns: set-config (miss_send_len), packet-in decoding with its
//     OXM match (in_port and any other field, e.g. registers and conntrack fields, kept
//     raw), cookie, table ID and reason, and packet-out encoding with output actions (1.3).
//
// Monitor keeps one such connection open for requests: Conn returns it or dials one, Run
// reconnects with a Backoff when it drops, and each reconnection after a loss (ovs-vswitchd
// restarted, the bridge re-created, a keepalive missed) is reported on Resets, since the
// switch may have lost every flow and group. The native backend's Bridge is built on a
// Monitor; the reject responder redials with a Backoff of its own bounds.
//
// Connecting to the bridge's management socket (unix:<rundir>/<bridge>.mgmt) is enough: Open
// vSwitch treats such a connection as a service controller that receives packet-ins of
// controller actions (reason "action") once it is connected; see Dial.
package ofconn
