package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	"github.com/antrea-proxy/antrea-proxy/pkg/loadbalancer"
)

// cleanupCommand is the subcommand the chart's uninstall hook runs.
const cleanupCommand = "cleanup-finalizers"

// defaultCleanupTimeout bounds cleanup-finalizers.
const defaultCleanupTimeout = 2 * time.Minute

// runCleanup removes the controller's finalizer (and what it wrote) from
// every Service; it needs no configuration file and no running controller.
func runCleanup(args []string) error {
	fs := flag.NewFlagSet("antrea-controller "+cleanupCommand, flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file; empty means in-cluster")
	override := fs.String("kube-apiserver-override", "", `kube-apiserver to talk to instead of the in-cluster address: "https://host:port", host or host:port`)
	timeout := fs.Duration("timeout", defaultCleanupTimeout, "give up after this long")
	class := fs.String("load-balancer-class", config.DefaultLoadBalancerClass,
		"the controller's loadBalancerClass: the well-known finalizer is removed only from Services without a class or of this one")
	klog.InitFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected arguments %q", cleanupCommand, fs.Args())
	}
	if *timeout <= 0 {
		return fmt.Errorf("%s: --timeout must be > 0, got %v", cleanupCommand, *timeout)
	}
	// The same checks as the config file's kubeAPIServerOverride.
	c := config.ControllerConfig{KubeAPIServerOverride: *override, LoadBalancerClass: *class}
	c.Defaults()
	if err := c.Validate(); err != nil {
		return fmt.Errorf("%s: --kube-apiserver-override: %w", cleanupCommand, err)
	}
	client, err := newClient(*kubeconfig, *override)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	n, err := loadbalancer.RemoveFinalizers(ctx, client, c.LoadBalancerClass)
	if err != nil {
		return err
	}
	klog.InfoS("Removed the LoadBalancer finalizer from Services", "services", n)
	return nil
}
