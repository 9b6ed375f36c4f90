// Command antrea-cni is the CNI plugin of antrea-proxy's node data path. A container runtime
// runs it with the CNI_* environment variables and the network configuration on stdin; it
// forwards the request to antrea-agent over a unix socket (the "socketPath" of the
// configuration, /var/run/antrea/cni.sock by default) and prints the CNI result or error. A DEL
// that cannot reach the agent is written to "delSpoolDir" (/var/run/antrea/cni-del-spool by
// default), which the agent replays when it starts.
//
// An example /etc/cni/net.d/10-antrea.conflist:
//
//	{
//	  "cniVersion": "1.0.0",
//	  "name": "antrea",
//	  "plugins": [
//	    {"type": "antrea-cni", "socketPath": "/var/run/antrea/cni.sock"},
//	    {"type": "portmap", "capabilities": {"portMappings": true}}
//	  ]
//	}
package main

import (
	"context"
	"os"

	"github.com/antrea-proxy/antrea-proxy/pkg/cni/plugin"
)

func main() {
	os.Exit(plugin.Run(context.Background(), plugin.Env{
		Getenv: os.Getenv,
		Stdin:  os.Stdin,
		Stdout: os.Stdout,
		Stderr: os.Stderr,
	}))
}
