// Package healthcheck serves the proxier's health to load balancers and to the kubelet:
//
//   - ServiceHealthServer answers on the healthCheckNodePort of every Service with
//     externalTrafficPolicy=Local, on the node's addresses: 200 when this node has a ready
//     endpoint of the Service, 503 otherwise (as kube-proxy's service health server does);
//   - ProxyHealth provides the agent's /healthz and /livez (KEP-3836): the data plane is stale
//     when a queued change has not been synced within 2×fullSyncPeriod; both also fail when the
//     OpenFlow connection to OVS (ProxyHealth.WatchOVS) has been down longer than a grace
//     period (60 s by default), and /healthz also fails while the Node is being deleted or is
//     tainted ToBeDeletedByClusterAutoscaler. The body says why.
//
// Both implement observe.Observer (the proxier's event contract), so the proxier feeds them
// like the metrics recorder.
package healthcheck
