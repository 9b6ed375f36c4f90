// Package lbapi is the vocabulary that antrea-controller's LoadBalancer provider
// (package loadbalancer) and antrea-agent share on Services: the project's annotation
// names, its finalizer, and the parsers and formatters of the annotation values.
//
// It is a leaf package (standard library only) so that the agent can read what the
// controller writes, antrea-proxy.io/announcing-node above all, without linking the
// controller, its IPAM or leader election. The meaning of each annotation is documented
// in package loadbalancer.
package lbapi
