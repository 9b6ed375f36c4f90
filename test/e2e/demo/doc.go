// Package demo is `make demo`: it brings up the two-node e2e sandbox (test/e2e/framework) and
// the real antrea-controller as its LoadBalancer provider, with a VIP pool and a Proxy pool. It
// deploys echo pods and three LoadBalancer Services (a VIP-mode one, a Proxy-mode one and a
// Proxy-mode one with externalTrafficPolicy=Local, which the provider serves but marks
// Degraded), prints the addresses, ipModes and KEP-4631 conditions the provider wrote, points
// an external L4 load balancer at the provider's Proxy addresses, sends traffic from a pod and
// from the external client, prints who answered and from which source the backend saw the
// connection, and prints `antctl get servicemap`. Every traffic line is checked: a wrong answer
// fails the demo. The sandbox then keeps running until `make demo-down` (SIGUSR1) stops it. The
// demo is a test (build tag "demo") because the sandbox is built on testing.TB.
package demo
