// Command kubectl is kubectl built from the k8s.io/kubectl module pinned in this directory's go.mod,
// for the real-cluster tests and demo (hack/cluster.sh builds it into _output/bin/kubectl). It is
// its own module so neither the main module nor hack/tools depends on kubectl's packages.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
)

func main() {
	os.Exit(cli.Run(cmd.NewDefaultKubectlCommand()))
}
