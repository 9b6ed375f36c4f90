//go:build tools

// Package tools records staticcheck, which `make lint` builds into _output/bin, so that `go mod
// tidy` keeps its dependencies in go.mod and go.sum. The build tag keeps it out of every real
// build.
package tools

import _ "honnef.co/go/tools/cmd/staticcheck"
