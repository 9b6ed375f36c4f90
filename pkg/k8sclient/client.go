// Package k8sclient builds the Kubernetes client configuration of antrea-proxy's binaries.
package k8sclient

import (
	"errors"
	"fmt"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Client-side rate limits. client-go's defaults (5 requests/s, burst 10) make a controller that
// writes the status of hundreds of Services at once take minutes.
const (
	QPS   = 50
	Burst = 100
)

// In-cluster credentials, mounted into every Pod of a ServiceAccount with a token.
const (
	inClusterTokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"
	inClusterCAFile    = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
)

// Options say where the client finds kube-apiserver and its credentials.
type Options struct {
	// Kubeconfig is a kubeconfig file; "" means the in-cluster configuration.
	Kubeconfig string
	// APIServerOverride, when set, replaces the server of the kubeconfig or of the in-cluster
	// configuration (which is the kubernetes Service's ClusterIP): a node whose proxy is
	// antrea-agent itself cannot reach that ClusterIP before antrea-agent programmed it. It is
	// a URL ("https://10.0.0.1:6443"), or a host or host:port, which means https.
	APIServerOverride string
	// TokenFile and CAFile are the in-cluster credentials; "" means the ServiceAccount mount.
	// Used only without Kubeconfig.
	TokenFile, CAFile string
}

// Build returns the client configuration o describes, with antrea-proxy's client rate limits.
func Build(o Options) (*rest.Config, error) {
	var rc *rest.Config
	var err error
	switch {
	case o.Kubeconfig != "":
		if rc, err = clientcmd.BuildConfigFromFlags("", o.Kubeconfig); err != nil {
			return nil, fmt.Errorf("loading kubeconfig %s: %w", o.Kubeconfig, err)
		}
	case o.APIServerOverride != "":
		// In a Pod, but kube-apiserver is not to be reached through the kubernetes Service:
		// only the mounted credentials are needed (rest.InClusterConfig also insists on the
		// KUBERNETES_SERVICE_HOST/PORT variables).
		if rc, err = inClusterCredentials(o); err != nil {
			return nil, err
		}
	default:
		if rc, err = rest.InClusterConfig(); err != nil {
			return nil, fmt.Errorf("no kubeconfig given and not running in a cluster: %w", err)
		}
	}
	if o.APIServerOverride != "" {
		// client-go takes a URL, a host or a host:port (https) here; pkg/config validated it.
		rc.Host = o.APIServerOverride
	}
	rc.QPS, rc.Burst = QPS, Burst
	return rc, nil
}

func inClusterCredentials(o Options) (*rest.Config, error) {
	tokenFile, caFile := o.TokenFile, o.CAFile
	if tokenFile == "" {
		tokenFile = inClusterTokenFile
	}
	if caFile == "" {
		caFile = inClusterCAFile
	}
	if _, err := os.Stat(tokenFile); err != nil {
		return nil, fmt.Errorf("no kubeconfig given and no ServiceAccount token: %w", err)
	}
	tls := rest.TLSClientConfig{}
	if _, err := os.Stat(caFile); err == nil {
		tls.CAFile = caFile
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("reading the in-cluster CA: %w", err)
	}
	return &rest.Config{TLSClientConfig: tls, BearerTokenFile: tokenFile}, nil
}
