// Package cluster is the real-cluster suite: the project's images (hack/images.sh) run by real
// kubelets and containerd on nodes that each live in their own network and mount namespace, on
// the e2e framework's control plane plus kube-scheduler, with the Helm chart installed for real.
// Everything is behind the "cluster" build tag; `make test-cluster` runs it and `make
// demo-cluster` leaves a cluster running (hack/cluster.sh).
package cluster
