//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/antrea-proxy/antrea-proxy/test/chart"
	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// TestChartDryRun renders the Helm chart (default values, the documented variants and every
// option set) and creates every rendered object, and every object of the generated manifest,
// with a server-side dry run and strict field validation against the sandbox's kube-apiserver:
// schema, defaulting, validation and admission run; nothing is stored.
func TestChartDryRun(t *testing.T) {
	h := chart.NewHelm(t)
	cp := framework.StartControlPlane(t, framework.ControlPlaneOptions{})
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(cp.Config)
	require.NoError(t, err)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cp.Client.Discovery()))

	manifest, err := os.ReadFile(filepath.Join(h.Root, "build", "yamls", "antrea-proxy.yml"))
	require.NoError(t, err)
	variants := map[string]string{"build/yamls/antrea-proxy.yml": string(manifest)}
	for name, args := range map[string][]string{
		"defaults":                   nil,
		"proxyLoadBalancerIPs=false": {"--set", "antreaProxy.proxyLoadBalancerIPs=false"},
		"netdev, every option": {
			"--set", "ovs.datapathType=netdev,antreaProxy.proxyAll=true,antreaProxy.serviceProxyName=x",
			"--set", "antreaProxy.nodePortAddresses={192.168.0.0/16},antreaProxy.skipServices={kube-system/kube-dns}",
			"--set", "controller.leaderElection.enable=false,controller.replicas=1,agent.cni.portmap=false",
			"--set-json", `imagePullSecrets=[{"name":"regcred"}]`,
			"--set-json", `lbPools=[{"name":"vip","cidrs":["10.0.10.0/24"],"nodeSelector":{"matchLabels":{"lb":""}}},{"name":"edge","ipMode":"Proxy","ranges":["10.0.20.1-10.0.20.9"]}]`,
		},
	} {
		out, err := h.Template("", args...)
		require.NoError(t, err, name)
		variants[name] = out
	}

	for name, manifest := range variants {
		t.Run(name, func(t *testing.T) {
			docs, err := chart.Documents(manifest)
			require.NoError(t, err)
			kinds := map[string]int{}
			for _, doc := range docs {
				obj := &unstructured.Unstructured{}
				require.NoError(t, yaml.Unmarshal(doc, &obj.Object))
				gvk := obj.GroupVersionKind()
				m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
				require.NoError(t, err, "the API server does not serve %s", gvk)
				var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
				if m.Scope.Name() == meta.RESTScopeNameNamespace {
					require.Equal(t, chart.Namespace, obj.GetNamespace(), "%s %s must name its namespace", gvk.Kind, obj.GetName())
					ri = dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
				}
				_, err = ri.Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"})
				require.NoError(t, err, "server-side dry run of %s %s", gvk.Kind, obj.GetName())
				kinds[gvk.Kind]++
			}
			// Roles in the release namespace: the controller's leader election Lease, and the
			// announcer Leases (the agents' and the controller's).
			want := map[string]int{"ServiceAccount": 2, "ConfigMap": 1, "ClusterRole": 2, "ClusterRoleBinding": 2,
				"Role": 3, "RoleBinding": 3, "DaemonSet": 1, "Deployment": 1}
			if name == "netdev, every option" {
				want["Role"], want["RoleBinding"] = 2, 2 // no leader election
			}
			if name != "build/yamls/antrea-proxy.yml" {
				// helm template renders the uninstall hook (antrea-controller cleanup-finalizers):
				// its Job, ServiceAccount, ClusterRole and ClusterRoleBinding. The plain manifest
				// is rendered without hooks.
				want["Job"] = 1
				for _, k := range []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding"} {
					want[k]++
				}
			}
			require.Equal(t, want, kinds)
		})
	}
}
