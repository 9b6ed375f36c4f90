// Command coredns is CoreDNS with only the plugins the test clusters' DNS uses: kubernetes (the
// cluster.local zone), cache, errors, health, ready, reload, loadbalance, log, hosts and metrics
// (the "prometheus" directive). There is no forward plugin: the cluster DNS answers only for
// names it knows and never asks a server outside the cluster.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

// directives is the plugin chain order: CoreDNS's own order (core/dnsserver/zdirectives.go)
// restricted to the plugins imported above.
func directives() []string {
	return []string{
		"reload",
		"ready",
		"health",
		"prometheus",
		"errors",
		"log",
		"loadbalance",
		"cache",
		"hosts",
		"kubernetes",
	}
}

func main() {
	dnsserver.Directives = directives()
	coremain.Run()
}
