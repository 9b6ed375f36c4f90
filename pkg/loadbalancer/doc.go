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
//     clash and they are in one namespace (or the address's pool allows
//     cross-namespace sharing). Without it an address belongs to one
//     Service. Asking for an address that another namespace's Service
//     shares under the same key is refused (Unsupported, LoadBalancerIP).
//   - antrea-proxy.io/required-features: "IPFamilies,Ports,..." lists the
//     KEP-4631 features the Service needs; any that cannot be met gives
//     LoadBalancerServing=False/Unsupported naming them. Features that are
//     used but not required and cannot be met give LoadBalancerDegraded.
//
// The controller writes antrea-proxy.io/announcing-node (see
// lbapi.FormatAnnouncingNodes): "10.0.0.5=node-a,fd00::5=node-b", the node that
// must answer ARP/NDP for each VIP-mode address. Proxy-mode addresses are
// never listed: an external proxy receives their traffic. The well-known
// finalizer service.kubernetes.io/load-balancer-cleanup keeps a Service's
// addresses allocated until the controller has released them (on Services
// without a class or of the controller's class; earlier releases wrote
// antrea-proxy.io/load-balancer, which is replaced at the next sync).
//
// # Tenants
//
// A pool's scope (ipam.Scope: namespaces, namespaceSelector,
// serviceSelector, autoAssign) decides which Services may use it; a
// Service outside it is refused (Unsupported, LoadBalancerIP) even when it
// names the pool or one of its addresses, and namespace label changes
// re-queue the namespace's Services. The node announcing a shared address
// is chosen for all its sharers together (nodePicker.eligible): one sharer
// without local endpoints never withdraws the others' address. An address
// a deleted Service held stays reserved for its namespace/name for
// Options.ReleaseGrace (in memory: a restart ends it early), so a tenant
// waiting for it cannot take it from a Service being re-created. With no
// pool configured every Service reports so (Infrastructure).
// RemoveFinalizers, run by `antrea-controller cleanup-finalizers` from the
// chart's uninstall hook, undoes what the controller wrote on every
// Service.
//
// # What the controller cannot deliver
//
// On Proxy-mode pools the client source IP is lost, so
// externalTrafficPolicy=Local (ExternalTrafficPolicy), sessionAffinity
// ClientIP (SessionAffinity) and loadBalancerSourceRanges
// (LoadBalancerSourceRanges) cannot be honoured. The first two degrade the
// Service unless required; source ranges are a security control and are
// refused, unless the pool states that its proxy enforces them
// (proxyEnforcesSourceRanges). A family of spec.ipFamilies without a pool is
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
//
// An address a Service stops using (its type, class, requested address,
// pool or families changed, or it is refused) is retiring: no other
// Service can get it until the status write that stops publishing it has
// succeeded (or the Service is gone). Services that get no address because
// a pool is exhausted or their requested address is taken wait; the
// allocator reserves a freed address for the Service waiting longest that
// can use it, so whichever worker syncs first, younger waiters and new
// Services never overtake it, and every release queues the waiters. After
// a restart, the Services whose Serving condition says Infrastructure
// wait again in the order of that condition's transition time.
//
// # Taking over from another provider
//
// A Service this controller handles whose status.loadBalancer.ingress was
// set by someone else (no finalizer: another provider, or this controller
// before it had written one) keeps those addresses that lie in a pool it
// may use and are free: they are adopted, at start (after the Services
// with the finalizer) and on every sync, and get ipMode, announcing node,
// finalizer and conditions. Addresses outside every pool cannot be
// announced or proxied by antrea-proxy, so the Service gets new addresses
// from the pools instead; to keep such an address, add it to a pool.
// Services of another class are never touched.
//
// # Health and metrics
//
// NewHTTPHandler serves /healthz (no sync wedged, Lease renewed),
// /readyz (informers synced and allocations rebuilt; a standby is ready)
// and /readyz/leader (only the writer), and Metrics on /metrics; see
// docs/metrics.md.
package loadbalancer
