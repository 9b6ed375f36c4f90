//go:build tools

// Package tools records the helm command that hack/build-helm.sh builds, so that `go mod tidy` keeps
// its dependencies in go.mod and go.sum. The build tag keeps it out of every real build.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
