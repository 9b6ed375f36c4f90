// Command antctl shows what antrea-agent programmed on this node: the servicemap (every Service
// port, with each LB ingress's decision and reason), the OVS flows of a Service, the agent's
// configuration and versions. It talks to the agent's root-only unix socket.
package main

import (
	"os"

	"github.com/antrea-proxy/antrea-proxy/pkg/antctl"
)

func main() {
	os.Exit(antctl.Main(os.Args[1:], os.Stdout, os.Stderr))
}
