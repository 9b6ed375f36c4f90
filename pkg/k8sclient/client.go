// Package k8sclient builds the Kubernetes client configuration of antrea-proxy's binaries.
package k8sclient

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Client-side rate limits. client-go's defaults (5 requests/s, burst 10) make a controller that
// writes the status of hundreds of Services at once take minutes.
const (
	QPS   = 50
	Burst = 100
)

// RESTConfig loads kubeconfig, or the in-cluster configuration when kubeconfig is empty, with
// antrea-proxy's client rate limits.
func RESTConfig(kubeconfig string) (*rest.Config, error) {
	var rc *rest.Config
	var err error
	if kubeconfig == "" {
		if rc, err = rest.InClusterConfig(); err != nil {
			return nil, fmt.Errorf("no kubeconfig given and not running in a cluster: %w", err)
		}
	} else if rc, err = clientcmd.BuildConfigFromFlags("", kubeconfig); err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s: %w", kubeconfig, err)
	}
	rc.QPS, rc.Burst = QPS, Burst
	return rc, nil
}
