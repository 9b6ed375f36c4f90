// Package ofconn is a minimal OpenFlow 1.3 controller connection to an Open vSwitch bridge,
// written for one job: receiving packet-ins and answering them with packet-outs (the reject
// responder of Services without endpoints).
//
// It implements only this subset of the protocol, with encoding/binary:
//   - hello and version negotiation (OpenFlow 1.3 only, announced with a version bitmap);
//   - echo request/reply, in both directions, as a keepalive;
//   - features request/reply (the datapath ID);
//   - set-config (miss_send_len);
//   - packet-in decoding, with its OXM match (in_port and any other field, e.g. registers and
//     conntrack fields, kept raw), cookie, table ID and reason;
//   - packet-out encoding with output actions;
//   - barrier request/reply, and error messages.
//
// Monitor keeps such a connection open to watch the switch itself: it reconnects with a short
// backoff when the connection drops and reports each reconnection after a loss (ovs-vswitchd
// restarted, the bridge re-created, a keepalive missed), when the switch may have lost every
// flow and group.
//
// Flows are not programmed through this package (see pkg/ovs/openflow/ofctl).
//
// Connecting to the bridge's management socket (unix:<rundir>/<bridge>.mgmt) is enough: Open
// vSwitch treats such a connection as a service controller that receives packet-ins of
// controller actions (reason "action") once it is connected; see Dial.
package ofconn
