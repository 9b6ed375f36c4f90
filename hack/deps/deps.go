//go:build tools

// Package deps pins the modules that antrea-proxy has chosen (DEVELOPERS.md) so that `go mod
// tidy` keeps them while the packages that use them are being written. It is never built.
package deps

import (
	_ "github.com/containernetworking/cni/pkg/skel"
	_ "github.com/containernetworking/cni/pkg/types/100"
	_ "github.com/google/go-cmp/cmp"
	_ "github.com/google/gopacket"
	_ "github.com/ovn-org/libovsdb/client"
	_ "github.com/ovn-org/libovsdb/cmd/modelgen"
	_ "github.com/ovn-org/libovsdb/model"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/spf13/cobra"
	_ "github.com/stretchr/testify/require"
	_ "github.com/vishvananda/netlink"
	_ "github.com/vishvananda/netns"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/api/discovery/v1"
	_ "k8s.io/apimachinery/pkg/apis/meta/v1"
	_ "k8s.io/client-go/informers"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/client-go/kubernetes/fake"
	_ "k8s.io/client-go/tools/clientcmd"
	_ "k8s.io/client-go/tools/leaderelection"
	_ "k8s.io/client-go/tools/record"
	_ "k8s.io/klog/v2"
	_ "sigs.k8s.io/knftables"
	_ "sigs.k8s.io/yaml"
)
