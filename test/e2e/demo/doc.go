// Package demo is `make demo`: it brings up the two-node e2e sandbox (test/e2e/framework),
// deploys echo pods with a VIP-mode and a Proxy-mode LoadBalancer Service, sends traffic from a
// pod and from the external client, prints who answered and from which source the backend saw
// the connection, and prints `antctl get servicemap`. The sandbox then keeps running until
// `make demo-down` (SIGUSR1) stops it. The demo is a test (build tag "demo") because the
// sandbox is built on testing.TB.
package demo
