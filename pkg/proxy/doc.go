// Package proxy is AntreaProxy's core: it watches Services, EndpointSlices and this Node, turns
// what changed into OpenFlow groups and flows through the pipeline package, and installs only the
// difference through an openflow.Bridge, in one atomic bundle per sync. See README.md next to this
// file for the design.
package proxy
