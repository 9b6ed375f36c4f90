//go:build tools

// Package tools records the commands that hack/build-control-plane.sh builds, so that `go mod tidy`
// keeps their dependencies in go.mod and go.sum. The build tag keeps it out of every real build.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
