#!/usr/bin/env bash
# hack/cluster-node.sh runs one node of the real-cluster tests (test/cluster): containerd and the
# kubelet, in the node's own network namespace and mount namespace, so that the host paths the
# chart mounts (/etc/cni/net.d, /opt/cni/bin, /var/run/antrea, /var/lib/kubelet, /var/run/netns, ...)
# are the node's own. The test harness starts it as
#
#   nsenter --net=/run/netns/<node netns> unshare --mount --propagation slave -- \
#     hack/cluster-node.sh run <node dir> <cgroup> <images.tar>...
#
# $KUBELET is the kubelet binary, $NODE_NAME and $NODE_IP the Node name and InternalIP.
# <node dir> holds containerd.toml, kubelet.yaml and kubelet.kubeconfig (written by the harness);
# each per-node host path is bind-mounted from <node dir>/fs/<path>. Every process of the node
# (containerd, its shims, the kubelet, every container) lives below the cgroup <cgroup> of each
# cgroup v1 hierarchy (the kubelet's cgroupRoot), which is how `cleanup` finds and ends them all.
#
#   hack/cluster-node.sh cleanup <node dir> <cgroup>   kill everything of the node, remove its cgroups
#                                                     and <node dir>
set -euo pipefail

# Host paths that are per node. /var/run is /run on Debian.
NODE_PATHS=(/var/lib/kubelet /run/antrea /var/lib/antrea /var/log/antrea /var/lib/antrea-proxy
  /run/netns /etc/cni/net.d /opt/cni/bin /var/lib/cni /var/log/pods /var/log/containers
  /run/containerd /var/lib/containerd)

hierarchies() {
  local h
  for h in /sys/fs/cgroup/*/; do
    [ -f "$h/cgroup.procs" ] && echo "${h%/}"
  done
}

# join_cgroup CG: create CG/node in every hierarchy (cpuset values copied from the root, as a new
# v1 cpuset starts empty) and move this shell there; children inherit it.
join_cgroup() {
  local cg=$1 h d
  for h in $(hierarchies); do
    for d in "$h/$cg" "$h/$cg/node"; do
      mkdir -p "$d"
      if [ -f "$d/cpuset.cpus" ]; then
        cat "$h/cpuset.cpus" >"$d/cpuset.cpus"
        cat "$h/cpuset.mems" >"$d/cpuset.mems"
      fi
    done
    echo $$ >"$h/$cg/node/cgroup.procs"
  done
}

bind_paths() {
  local dir=$1 p
  # runc wants the source of a HostToContainer volume (the agent's /var/run/netns) on a shared or
  # slave mount, and looks the path up without resolving the /var/run symlink. Making / shared
  # here starts a peer group of this namespace only: nothing propagates back to the host.
  mount --make-rshared /
  for p in "${NODE_PATHS[@]}"; do
    mkdir -p "$dir/fs$p" "$p"
    mount --bind "$dir/fs$p" "$p"
    mount --make-rshared "$p"
  done
  # The CNI plugins a node is provisioned with (Debian's containernetworking-plugins); install-cni
  # adds antrea-cni next to them.
  cp /usr/lib/cni/loopback /usr/lib/cni/portmap /usr/lib/cni/host-local /opt/cni/bin/
}

run() {
  local dir=$1 cg=$2
  shift 2
  join_cgroup "$cg"
  bind_paths "$dir"
  local sock=$dir/containerd.sock
  containerd --config "$dir/containerd.toml" >"$dir/containerd.log" 2>&1 &
  local cpid=$! i
  trap 'kill $cpid 2>/dev/null; exit 0' TERM INT
  for i in $(seq 300); do
    ctr -a "$sock" version >/dev/null 2>&1 && break
    kill -0 $cpid || { echo "cluster-node: containerd exited, see $dir/containerd.log" >&2; exit 1; }
    sleep 0.1
  done
  local img
  for img in "$@"; do
    ctr -a "$sock" -n k8s.io images import "$img" >/dev/null
  done
  echo "cluster-node: containerd ready, ${#@} images imported; starting the kubelet" >&2
  "$KUBELET" --config="$dir/kubelet.yaml" --kubeconfig="$dir/kubelet.kubeconfig" \
    --hostname-override="$NODE_NAME" --node-ip="$NODE_IP" --v=2 &
  local kpid=$!
  trap 'kill $kpid $cpid 2>/dev/null; wait $kpid $cpid; exit 0' TERM INT
  # Exit (and let the harness see it) when either daemon dies.
  wait -n $kpid $cpid
  echo "cluster-node: a daemon exited" >&2
  kill $kpid $cpid 2>/dev/null || true
  exit 1
}

cleanup() {
  local dir=$1 cg=$2 h i pids
  for i in $(seq 100); do
    pids=$(cat $(find /sys/fs/cgroup/pids/"$cg" -name cgroup.procs 2>/dev/null) 2>/dev/null || true)
    [ -z "$pids" ] && break
    kill -9 $pids 2>/dev/null || true
    sleep 0.1
  done
  for h in $(hierarchies); do
    [ -d "$h/$cg" ] && find "$h/$cg" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
  # The node's mount namespace is gone with its last process, so its bind mounts are too.
  if [ -n "$dir" ] && [ -d "$dir" ]; then
    rm -rf "$dir" 2>/dev/null || { sleep 1; rm -rf "$dir"; }
  fi
}

case "${1:-}" in
  run) shift; run "$@" ;;
  cleanup) shift; cleanup "$@" ;;
  *) echo "usage: $0 run <node dir> <cgroup> <image.tar>... | cleanup <node dir> <cgroup>" >&2; exit 2 ;;
esac
