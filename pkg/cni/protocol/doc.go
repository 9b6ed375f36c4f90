// Package protocol is the wire protocol between the antrea-cni plugin and the CNI server in
// antrea-agent: one JSON request and one JSON response per CNI invocation, over HTTP on a unix
// socket. It also holds the network configuration the plugin reads, the spool of DEL requests
// that the plugin keeps while the agent is down, and the CNI error codes both sides use.
//
// The package depends on nothing of the agent, so the plugin binary stays small.
package protocol
