// Package loadbalancer is antrea-controller's LoadBalancer IP provider for
// bare metal. It watches Services of type LoadBalancer that have no
// spec.loadBalancerClass or the configured class, allocates one address
// per IP family from the configured pools (package ipam), picks the node
// that announces each VIP-mode address, and reports what it did through
// status.loadBalancer.ingress and the KEP-4631 conditions (package
// conditions). Services of any other class are never touched.
//
// # Annotations on the Service
//
//   - antrea-proxy.io/load-balancer-ips: "10.0.0.5,fd00::5" requests
//     addresses (like spec.loadBalancerIP, which is honoured too); each
//     must lie in a pool.
//   - antrea-proxy.io/lb-pool: "<pool>" restricts allocation to one pool.
//   - antrea-proxy.io/allow-shared-ip: "<key>" lets Services with the same
//     key share an address when none of their ports (protocol and port)
//     clash. Without it an address belongs to one Service.
//   - antrea-proxy.io/required-features: "IPFamilies,Ports,..." lists the
//     KEP-4631 features the Service needs; any that cannot be met gives
//     LoadBalancerServing=False/Unsupported naming them. Features that are
//     used but not required and cannot be met give LoadBalancerDegraded.
//
// The controller writes antrea-proxy.io/announcing-node (see
// lbapi.FormatAnnouncingNodes): "10.0.0.5=node-a,fd00::5=node-b", the node that
// must answer ARP/NDP for each VIP-mode address. Proxy-mode addresses are
// never listed: an external proxy receives their traffic. The finalizer
// antrea-proxy.io/load-balancer keeps a Service's addresses allocated
// until the controller has released them.
//
// # What the controller cannot deliver
//
// On Proxy-mode pools the client source IP is lost, so
// externalTrafficPolicy=Local (ExternalTrafficPolicy), sessionAffinity
// ClientIP (SessionAffinity) and loadBalancerSourceRanges
// (LoadBalancerSourceRanges) cannot be honoured. The first two degrade the
// Service unless required; source ranges are a security control and are
// always refused. A family of spec.ipFamilies without a pool is
// IPFamilies; a requested address outside the pools is LoadBalancerIP.
// Ports are always supported.
//
// # Consistency
//
// All allocation state lives in one ipam.Allocator (one lock), rebuilt at
// start from the status of the Services that carry the finalizer. Writes
// use the object's resourceVersion; on a conflict the Service is read
// again and the sync is redone. Leader election (RunLeaderElected) keeps a
// second replica from writing.
package loadbalancer
