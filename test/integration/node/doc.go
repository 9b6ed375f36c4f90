// Package node holds the node data path's integration tests: real OVS instances, each in its own
// network namespace that plays a node's host namespace, with the agent's data path (gateway,
// routes, nftables, CNI server) and a real proxier fed by a fake clientset, pods added by the
// real antrea-cni binary, and an underlay namespace joining the nodes and an external client.
package node
