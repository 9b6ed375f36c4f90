// Package servicetrace answers antctl trace: it builds the packet a request describes (from a
// local pod, from the node itself or from an external client, to IP:PORT/PROTO), walks it with
// pkg/ovs/openflow/oftrace through the flows and groups the agent's writers installed (the
// proxier's state, the gateway's flows, the CNI server's pod flows: never a dump of OVS, whose
// groups can be huge), with conntrack state "new", and returns the steps with table names, every
// candidate endpoint of the Service's select group (second-level groups included), the NAT
// applied, where the packet leaves and, when no endpoint was chosen, why: from the proxier's
// status of the Service that owns the address.
package servicetrace
