package framework

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// sandboxName names the cluster, user and context inside sandbox kubeconfigs.
const sandboxName = "antrea-proxy-e2e"

// WriteKubeconfig writes a self-contained kubeconfig (CA, client certificate and key embedded) that
// talks to server as the holder of kp.
func WriteKubeconfig(path, server string, caPEM []byte, kp *KeyPair) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[sandboxName] = &clientcmdapi.Cluster{
		Server:                   server,
		CertificateAuthorityData: caPEM,
	}
	cfg.AuthInfos[sandboxName] = &clientcmdapi.AuthInfo{
		ClientCertificateData: kp.CertPEM,
		ClientKeyData:         kp.KeyPEM,
	}
	cfg.Contexts[sandboxName] = &clientcmdapi.Context{Cluster: sandboxName, AuthInfo: sandboxName}
	cfg.CurrentContext = sandboxName
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	return nil
}

// LoadRESTConfig reads a kubeconfig the way a component given --kubeconfig does, with client-side
// rate limits raised for tests.
func LoadRESTConfig(path string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s: %w", path, err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	return cfg, nil
}
