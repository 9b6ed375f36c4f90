#!/usr/bin/env bash
# hack/cluster.sh runs the real-cluster suite (test/cluster): the project's images on real kubelet +
# containerd nodes, each in its own network and mount namespace, with the Helm chart installed.
#
#   hack/cluster.sh test      make images, then TestRealCluster (make test-cluster)
#   hack/cluster.sh demo      the same cluster with the chart installed, left running (make demo-cluster)
#   hack/cluster.sh failover  TestClusterLBFailover on three nodes (make test-cluster-failover)
#   hack/cluster.sh migration TestClusterKubeProxyMigration: from kube-proxy to antrea-proxy and
#                             back on a live cluster (make test-cluster-migration)
#   hack/cluster.sh upstream  the upstream Kubernetes e2e suite against the cluster (make test-upstream-e2e,
#                             docs/conformance.md; hack/build-e2e.sh builds it, IMAGES_E2E=1 the agnhost image);
#                             UPSTREAM_E2E_IPMODE=Proxy runs the LoadBalancers specs with a Proxy pool
#   hack/cluster.sh conformance  the same, focused on the 15 [Conformance] Services specs
#                             (make test-upstream-conformance; CI runs it after make test-cluster)
#   hack/cluster.sh down      stop the demo cluster
#   hack/cluster.sh cleanup   remove everything a cluster left behind (also run on failure/interrupt)
#
# It installs containerd, runc, containernetworking-plugins and strace (the keep-alive client's
# check) from Debian if missing, and builds kubectl (test/cluster/kubectl) and helm into
# _output/bin. Only one cluster runs at a time. The
# kubelets set a few host-wide sysctls (kernel.panic, vm.overcommit_memory, ...); test and down
# put the values from before the cluster back.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
ROOT=$(pwd)
BIN=$ROOT/_output/bin
STATE=$ROOT/_output/cluster
DEMO_PID=$ROOT/_output/cluster-demo.pid
NODES=${CLUSTER_NODES:-2}

log() { echo "cluster: $*" >&2; }

# The kubelet sets these host-wide sysctls at start (its protectKernelDefaults=false behaviour);
# save_sysctls records their values before a cluster starts and restore_sysctls puts them back.
SYSCTLS=(kernel.panic kernel.panic_on_oops vm.overcommit_memory vm.panic_on_oom kernel.keys.root_maxkeys kernel.keys.root_maxbytes)
SAVED=$ROOT/_output/cluster-sysctls.saved
save_sysctls() {
  [ -f "$SAVED" ] || sysctl -e "${SYSCTLS[@]}" | sed 's/ = /=/' >"$SAVED"
}
restore_sysctls() {
  if [ -f "$SAVED" ]; then
    sysctl -q -e -w $(cat "$SAVED") >/dev/null || true
    rm -f "$SAVED"
  fi
}

cleanup() {
  local d h cg ns pid
  for d in "$STATE"/apc-node*; do
    [ -d "$d" ] && bash hack/cluster-node.sh cleanup "$d" "$(basename "$d")"
  done
  for h in /sys/fs/cgroup/*/; do
    for cg in "$h"apc-node*; do
      [ -d "$cg" ] && bash hack/cluster-node.sh cleanup "" "$(basename "$cg")"
    done
  done
  for ns in $(ip netns list | awk '{print $1}' | grep '^apc-' || true); do
    for pid in $(ip netns pids "$ns"); do kill -9 "$pid" 2>/dev/null || true; done
    ip netns del "$ns"
  done
  ip link del apc-host 2>/dev/null || true
  rm -rf "$STATE"
}

prepare() {
  local need=() c
  for c in containerd:containerd runc:runc nsenter:util-linux strace:strace; do
    command -v "${c%%:*}" >/dev/null 2>&1 || need+=("${c#*:}")
  done
  [ -x /usr/lib/cni/loopback ] || need+=(containernetworking-plugins)
  if [ "${#need[@]}" -gt 0 ]; then
    log "installing Debian packages: ${need[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  fi
  bash hack/images.sh
  make -s helm
  if [ ! -x "$BIN/kubectl" ] || [ test/cluster/kubectl/go.sum -nt "$BIN/kubectl" ]; then
    log "building kubectl from test/cluster/kubectl"
    (cd test/cluster/kubectl && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$BIN/kubectl" .)
  fi
  bash hack/build-control-plane.sh --check || {
    log "building the control plane (hack/build-control-plane.sh)"
    bash hack/build-control-plane.sh
  }
}

case "${1:-}" in
  cleanup) cleanup ;;
  test)
    prepare
    save_sysctls
    trap 'cleanup; restore_sysctls' EXIT
    trap 'exit 130' INT TERM
    CLUSTER_NODES=$NODES go test -count=1 -tags cluster -run '^TestRealCluster$' -timeout 30m -v ./test/cluster/
    ;;
  failover|migration)
    name=TestClusterLBFailover
    [ "$1" = migration ] && name=TestClusterKubeProxyMigration
    prepare
    save_sysctls
    trap 'cleanup; restore_sysctls' EXIT
    trap 'exit 130' INT TERM
    CLUSTER_NODES=$NODES go test -count=1 -tags cluster -run "^$name\$" -timeout 30m -v ./test/cluster/
    ;;
  upstream|conformance)
    if [ "$1" = conformance ]; then
      export UPSTREAM_E2E_FOCUS='\[sig-network\] Services .*\[Conformance\]' UPSTREAM_E2E_IPMODE=VIP
    fi
    export IMAGES_E2E=1
    prepare
    bash hack/build-e2e.sh
    save_sysctls
    trap 'cleanup; restore_sysctls' EXIT
    trap 'exit 130' INT TERM
    CLUSTER_NODES=$NODES go test -count=1 -tags 'cluster upstream' -run '^TestUpstreamE2E$' -timeout 3h -v ./test/cluster/
    ;;
  demo)
    prepare
    [ -f "$DEMO_PID" ] && kill -0 "$(cat "$DEMO_PID")" 2>/dev/null && { log "a demo cluster is already running (make demo-cluster-down)"; exit 1; }
    rm -f "$ROOT/_output/cluster-demo.ready"
    save_sysctls
    log "starting a $NODES-node cluster (log: _output/cluster-demo.log)"
    CLUSTER_NODES=$NODES CLUSTER_DEMO_READY=$ROOT/_output/cluster-demo.ready \
      setsid go test -count=1 -tags 'cluster clusterdemo' -run '^TestDemoCluster$' -timeout 0 -v ./test/cluster/ \
      >"$ROOT/_output/cluster-demo.log" 2>&1 &
    echo $! >"$DEMO_PID"
    while [ ! -f "$ROOT/_output/cluster-demo.ready" ]; do
      kill -0 "$(cat "$DEMO_PID")" 2>/dev/null || { tail -40 "$ROOT/_output/cluster-demo.log" >&2; cleanup; restore_sysctls; exit 1; }
      sleep 2
    done
    cat "$ROOT/_output/cluster-demo.ready"
    ;;
  down)
    if [ -f "$DEMO_PID" ]; then
      pid=$(cat "$DEMO_PID")
      kill -TERM -- "-$pid" 2>/dev/null || true
      while kill -0 "$pid" 2>/dev/null; do sleep 1; done
      rm -f "$DEMO_PID"
    fi
    cleanup
    restore_sysctls
    log "demo cluster removed"
    ;;
  *) echo "usage: $0 test|failover|migration|demo|upstream|conformance|down|cleanup" >&2; exit 2 ;;
esac
