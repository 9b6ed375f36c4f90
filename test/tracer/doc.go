// Package tracer holds data-path behaviour tests: they run the real proxier over
// openflowtest.FakeBridge, add the gateway and pod flows the node data path and the CNI server
// would install, and trace packets through the result with pkg/ovs/openflow/oftrace. They need
// neither root nor Open vSwitch.
package tracer
