// Command antrea-agent runs on every node: it replaces kube-proxy by programming Services into
// Open vSwitch.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent"
	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	"github.com/antrea-proxy/antrea-proxy/pkg/k8sclient"
	"github.com/antrea-proxy/antrea-proxy/pkg/version"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "antrea-agent: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("antrea-agent", flag.ContinueOnError)
	configPath := fs.String("config", "/etc/antrea/antrea-agent.conf", "path of antrea-agent.conf")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file; overrides the config file's kubeconfig; empty means in-cluster")
	showVersion := fs.Bool("version", false, "print the version and exit")
	klog.InitFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *showVersion {
		fmt.Println("antrea-agent", version.Version)
		return nil
	}
	cfg, err := config.Load(*configPath)
	if err != nil {
		return err
	}
	if *kubeconfig != "" {
		cfg.Kubeconfig = *kubeconfig
	}
	rc, err := k8sclient.Build(k8sclient.Options{Kubeconfig: cfg.Kubeconfig, APIServerOverride: cfg.KubeAPIServerOverride})
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("building Kubernetes client: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	klog.InfoS("Starting antrea-agent", "version", version.Version, "node", cfg.NodeName,
		"proxyLoadBalancerIPs", cfg.AntreaProxy.ProxyLoadBalancerIPsEnabled(), "bridge", cfg.OVSBridge)
	return agent.Run(ctx, cfg, client)
}
