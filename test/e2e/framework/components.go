package framework

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
)

// File names inside ControlPlane.Dir.
const (
	caCertFile       = "ca.crt"
	apiserverCert    = "apiserver.crt"
	apiserverKey     = "apiserver.key"
	kcmServingCert   = "kcm-serving.crt"
	kcmServingKey    = "kcm-serving.key"
	saKeyFile        = "sa.key"
	saPubFile        = "sa.pub"
	adminKubeconfig  = "admin.kubeconfig"
	kcmKubeconfig    = "kube-controller-manager.kubeconfig"
	serviceAccountIs = "https://kubernetes.default.svc.cluster.local"
)

// writeCerts creates the CA, the serving certificates, the service-account key and the admin and
// controller-manager credentials.
func (cp *ControlPlane) writeCerts() error {
	ca, err := NewCertAuthority("antrea-proxy-e2e-ca")
	if err != nil {
		return err
	}
	cp.CA = ca
	cp.CAFile = cp.path(caCertFile)
	if err := os.WriteFile(cp.CAFile, ca.CertPEM, 0o644); err != nil {
		return fmt.Errorf("writing the CA certificate: %w", err)
	}
	// The kubernetes Service's ClusterIP comes from the first (primary) service range.
	kubernetesIP, err := firstIP(splitCIDRs(cp.ServiceCIDR)[0])
	if err != nil {
		return err
	}
	names := append([]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
		"kubernetes.default.svc.cluster.local"}, cp.opts.ExtraServingNames...)
	ips := append([]net.IP{net.IPv4(127, 0, 0, 1), kubernetesIP}, cp.opts.ExtraServingIPs...)
	serving, err := ca.IssueServing("kube-apiserver", names, ips)
	if err != nil {
		return err
	}
	if err := serving.WriteFiles(cp.path(apiserverCert), cp.path(apiserverKey)); err != nil {
		return err
	}
	kcmServing, err := ca.IssueServing("kube-controller-manager", []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return err
	}
	if err := kcmServing.WriteFiles(cp.path(kcmServingCert), cp.path(kcmServingKey)); err != nil {
		return err
	}
	priv, pub, err := NewServiceAccountKey()
	if err != nil {
		return err
	}
	if err := os.WriteFile(cp.path(saKeyFile), priv, 0o600); err != nil {
		return fmt.Errorf("writing the service-account key: %w", err)
	}
	if err := os.WriteFile(cp.path(saPubFile), pub, 0o644); err != nil {
		return fmt.Errorf("writing the service-account public key: %w", err)
	}
	return nil
}

// firstIP is the first host address of cidr: the ClusterIP of the kubernetes Service.
func firstIP(cidr string) (net.IP, error) {
	_, n, err := net.ParseCIDR(cidr)
	if err != nil {
		return nil, fmt.Errorf("service CIDR %q: %w", cidr, err)
	}
	ip := n.IP.To4()
	if ip == nil {
		ip = n.IP.To16()
	}
	first := make(net.IP, len(ip))
	copy(first, ip)
	first[len(first)-1]++
	return first, nil
}

func (cp *ControlPlane) startEtcd() error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	client, peer := "http://"+hostPort(ports[0]), "http://"+hostPort(ports[1])
	data := cp.path("etcd-data")
	if err := os.RemoveAll(data); err != nil {
		return fmt.Errorf("clearing etcd's data directory: %w", err)
	}
	p, err := cp.launch("etcd", []string{
		"--name=e2e",
		"--data-dir=" + data,
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=e2e=" + peer,
		"--initial-cluster-state=new",
		// A sandbox does not need its data to survive a power cut; fsync dominates start-up on slow disks.
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	})
	if err != nil {
		return err
	}
	httpClient := &http.Client{Timeout: 2 * time.Second}
	if err := waitReady(p, cp.opts.StartTimeout, "etcd to report healthy on "+client+"/health", func(ctx context.Context) (bool, string) {
		return probe(ctx, httpClient, client+"/health", `"health":"true"`)
	}); err != nil {
		return err
	}
	cp.EtcdURL = client
	return nil
}

func (cp *ControlPlane) startAPIServer() error {
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	url := "https://" + hostPort(ports[0])
	args := []string{
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(ports[0]),
		// A loopback address cannot be an endpoint of the kubernetes Service, so the apiserver does
		// not reconcile that Service's endpoints (as upstream's own test server does).
		"--advertise-address=127.0.0.1",
		"--endpoint-reconciler-type=none",
		"--etcd-servers=" + cp.EtcdURL,
		"--client-ca-file=" + cp.CAFile,
		"--tls-cert-file=" + cp.path(apiserverCert),
		"--tls-private-key-file=" + cp.path(apiserverKey),
		"--cert-dir=" + cp.path("apiserver-certs"),
		"--authorization-mode=Node,RBAC",
		"--service-cluster-ip-range=" + cp.ServiceCIDR,
		"--service-account-issuer=" + serviceAccountIs,
		"--service-account-key-file=" + cp.path(saPubFile),
		"--service-account-signing-key-file=" + cp.path(saKeyFile),
		"--allow-privileged=true",
		"--profiling=false",
	}
	p, err := cp.launch("kube-apiserver", append(args, cp.opts.ExtraAPIServerArgs...))
	if err != nil {
		return err
	}
	admin, err := cp.CA.IssueClient("kubernetes-admin", []string{"system:masters"})
	if err != nil {
		return err
	}
	httpClient, err := tlsClient(cp.CA, admin)
	if err != nil {
		return err
	}
	if err := waitReady(p, cp.opts.StartTimeout, "kube-apiserver to report ready on "+url+"/readyz", func(ctx context.Context) (bool, string) {
		return probe(ctx, httpClient, url+"/readyz", "ok")
	}); err != nil {
		return err
	}
	cp.APIServerURL = url
	cp.AdminKubeconfig = cp.path(adminKubeconfig)
	return WriteKubeconfig(cp.AdminKubeconfig, url, cp.CA.CertPEM, admin)
}

func (cp *ControlPlane) connectAdmin() error {
	cfg, err := LoadRESTConfig(cp.AdminKubeconfig)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building the admin clientset: %w", err)
	}
	cp.Config, cp.Client = cfg, cs
	return nil
}

func (cp *ControlPlane) startControllerManager() error {
	kp, err := cp.CA.IssueClient("system:kube-controller-manager", nil)
	if err != nil {
		return err
	}
	kubeconfig := cp.path(kcmKubeconfig)
	if err := WriteKubeconfig(kubeconfig, cp.APIServerURL, cp.CA.CertPEM, kp); err != nil {
		return err
	}
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	healthz := "https://" + hostPort(ports[0]) + "/healthz"
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		// Trust the sandbox CA directly instead of looking up the apiserver's front-proxy settings,
		// which this sandbox does not configure.
		"--authentication-skip-lookup=true",
		"--client-ca-file=" + cp.CAFile,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(ports[0]),
		"--tls-cert-file=" + cp.path(kcmServingCert),
		"--tls-private-key-file=" + cp.path(kcmServingKey),
		"--controllers=" + strings.Join([]string{
			"endpointslice-controller",
			"serviceaccount-controller",
			"serviceaccount-token-controller",
			"namespace-controller",
			"garbage-collector-controller",
			"node-ipam-controller",
			"root-ca-certificate-publisher-controller",
			"clusterrole-aggregation-controller",
		}, ","),
		"--allocate-node-cidrs=true",
		"--cluster-cidr=" + cp.ClusterCIDR,
		"--service-cluster-ip-range=" + cp.ServiceCIDR,
		"--configure-cloud-routes=false",
		"--use-service-account-credentials=true",
		"--root-ca-file=" + cp.CAFile,
		"--service-account-private-key-file=" + cp.path(saKeyFile),
		"--leader-elect=false",
		"--profiling=false",
		"--v=2",
	}
	if len(splitCIDRs(cp.ClusterCIDR)) > 1 {
		// nodeipam refuses --node-cidr-mask-size with dual-stack cluster CIDRs.
		args = append(args,
			"--node-cidr-mask-size-ipv4="+strconv.Itoa(cp.opts.NodeCIDRMaskSize),
			"--node-cidr-mask-size-ipv6="+strconv.Itoa(cp.opts.NodeCIDRMaskSizeIPv6))
	} else {
		args = append(args, "--node-cidr-mask-size="+strconv.Itoa(cp.opts.NodeCIDRMaskSize))
	}
	p, err := cp.launch("kube-controller-manager", append(args, cp.opts.ExtraControllerManagerArgs...))
	if err != nil {
		return err
	}
	httpClient, err := tlsClient(cp.CA, nil)
	if err != nil {
		return err
	}
	return waitReady(p, cp.opts.StartTimeout, "kube-controller-manager to report healthy on "+healthz, func(ctx context.Context) (bool, string) {
		return probe(ctx, httpClient, healthz, "ok")
	})
}

// waitReady polls ready until it holds, the process exits (an error that says how, marked
// errPortInUse if its log says so) or timeout passes. A process that never became ready is stopped.
func waitReady(p *process, timeout time.Duration, what string, ready func(ctx context.Context) (bool, string)) error {
	return waitReadyOrFail(p, timeout, what, func(ctx context.Context) (bool, string, error) {
		ok, status := ready(ctx)
		return ok, status, nil
	})
}

// waitReadyOrFail is waitReady whose condition can also fail at once (a non-nil error).
func waitReadyOrFail(p *process, timeout time.Duration, what string, ready func(ctx context.Context) (bool, string, error)) error {
	err := Poll(context.Background(), timeout, what, func(ctx context.Context) (bool, string, error) {
		select {
		case <-p.Exited():
			return false, "", p.ExitError()
		default:
		}
		return ready(ctx)
	})
	if err != nil {
		p.Stop()
	}
	return err
}

// probe GETs url and reports whether it answered 200 with want in the body; otherwise what it saw.
func probe(ctx context.Context, c *http.Client, url, want string) (bool, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err.Error()
	}
	resp, err := c.Do(req)
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode == http.StatusOK && strings.Contains(string(body), want) {
		return true, ""
	}
	return false, fmt.Sprintf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
}

// tlsClient trusts ca and, when client is set, presents it.
func tlsClient(ca *CertAuthority, client *KeyPair) (*http.Client, error) {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if client != nil {
		pair, err := tls.X509KeyPair(client.CertPEM, client.KeyPEM)
		if err != nil {
			return nil, fmt.Errorf("loading the client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}, nil
}
