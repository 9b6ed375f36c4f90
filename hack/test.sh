#!/usr/bin/env bash
# hack/test.sh runs antrea-proxy's test suites.
#   unit         fast tests, no root, no OVS (go test -short); must stay under 2 minutes
#   integration  every package with its real-OVS integration tests (needs root and hack/setup.sh)
#   e2e          the sandbox-cluster end-to-end suite (slow; builds the control plane once)
#   all          unit, then integration (what `make test` and CI run)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
suite=${1:-all}
# test/e2e's own suite needs the e2e build tag; its helper packages have plain unit tests.
pkgs=$(go list ./...)

# The chart tests (test/chart) run helm built from hack/tools/helm; build it first (about two
# minutes once, instant afterwards) so the build shows its progress here, not inside a test.
build_helm() {
  bash hack/build-helm.sh
}
run_unit() {
  build_helm
  echo "== unit tests (go test -short) =="
  go test -short -count=1 $pkgs
}
run_integration() {
  echo "== integration tests (real Open vSwitch, userspace datapath; slower) =="
  go test -count=1 -timeout 30m $pkgs
}
run_e2e() {
  if [ -d test/e2e ] && ls test/e2e/*_test.go >/dev/null 2>&1; then
    echo "== end-to-end tests (sandbox cluster) =="
    # Build etcd, kube-apiserver and kube-controller-manager first (about 15 minutes on a fresh
    # machine, seconds once built) so the build shows its progress here, not inside a test.
    bash hack/build-control-plane.sh
    build_helm
    go test -count=1 -timeout 60m -tags e2e ./test/e2e/...
  else
    echo "== end-to-end tests: none yet =="
  fi
}
case "$suite" in
  unit) run_unit ;;
  integration) run_integration ;;
  e2e) run_e2e ;;
  all) run_unit; run_integration ;;
  *) echo "usage: $0 unit|integration|e2e|all" >&2; exit 2 ;;
esac
