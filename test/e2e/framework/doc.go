// Package framework is the e2e sandbox cluster: it runs a real Kubernetes control plane (etcd,
// kube-apiserver with RBAC and client-certificate authentication, kube-controller-manager) as local
// processes bound to 127.0.0.1, built from the modules pinned in hack/tools by
// hack/build-control-plane.sh, and hands tests an admin clientset plus kubeconfigs for any other
// identity. Every process and temporary directory is removed through t.Cleanup, also when the test
// fails; component logs are kept under _output/e2e-logs/<test>/ and their tails printed on failure.
//
// Nodes are antrea-proxy nodes (Open vSwitch, antrea-agent, antrea-cni pods) or, for the
// conformance suite's reference (test/conformance), kube-proxy nodes (SandboxOptions.Proxy =
// ProxyKubeProxy: kube-proxy in nftables mode, pods on a Linux bridge; kubeproxy.go,
// bridgenet.go).
package framework
