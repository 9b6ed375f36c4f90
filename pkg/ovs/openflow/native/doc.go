// Package native implements openflow.Bridge over one persistent OpenFlow 1.5 connection to an
// Open vSwitch bridge (its management socket), without running ovs-ofctl: the hot path of
// incremental changes costs a couple of round trips on a unix socket instead of a process.
//
// Every Apply is one bundle with the flags ovs-ofctl uses (atomic and ordered): bundle open,
// one bundle-add message per flow or group mod, a barrier, then commit when the switch refused
// none of them (discard otherwise). The messages are byte-for-byte what `ovs-ofctl -O
// OpenFlow15 bundle` sends for the text the ofctl backend renders (tests compare every flow
// and group of the golden files). A group too large for one 64 KiB message is split into a
// group mod and insert-bucket messages of the same bundle. The switch's error about a message
// maps back to its op: the error is a *RejectedOpError (see openflow.RejectedOpIndex).
//
// Meters (meter mods, OFPMP_METER_STATS) and table statistics (OFPMP_TABLE_STATS) go over the
// same connection. Flow dumps, counts and aggregate statistics (multipart replies this package
// does not decode) go to a Delegate, normally the ofctl backend.
//
// The connection is the project's one OpenFlow connection type, an ofconn.Conn of version 1.5
// kept by an ofconn.Monitor: this package encodes the messages and matches their replies and
// errors to ops; the connection does the handshake, the echo keepalive when idle (held while
// an Apply is in flight), the routing of replies by xid and multipart replies. Run reconnects
// after a loss and reports each reconnection on Resets (the Monitor's resets: the switch may
// have lost every flow and group). A FlowWatch keeps an OpenFlow flow monitor on the same
// connection and reports the changes of the flows the Bridge did not make itself.
package native
