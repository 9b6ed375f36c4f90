#!/usr/bin/env bash
# hack/build-control-plane.sh builds the e2e sandbox's Kubernetes components and etcd from the Go
# modules pinned in hack/tools/go.mod (k8s.io/kubernetes with its staging modules replaced by the
# published k8s.io/* modules, and go.etcd.io/etcd/server/v3) into _output/bin: the control plane (etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler) and the node components kube-proxy (the
# conformance suite's reference) and kubelet (the real-cluster suite). Nothing prebuilt is downloaded:
# only Go modules from the module proxy.
#
# It rebuilds only when hack/tools/go.mod or go.sum (or this script's build recipe) changes: a stamp file
# next to the binaries records their hash. A fresh build took 12-13 minutes on 2 cores (modules included);
# a rebuild with a warm Go build cache about 10 seconds, and an up-to-date check is instant.
#
# To move to another release: in hack/tools, set k8s.io/kubernetes to v1.X.Y in go.mod, point every
# k8s.io/<staging> replace at v0.X.Y, set go.etcd.io/etcd/server/v3 to the etcd version that
# k8s.io/kubernetes's own go.mod requires, then run `go mod tidy` there and commit go.mod and go.sum.
#
# Usage: hack/build-control-plane.sh [--check|--force]
#   --check  exit 0 if the binaries are built and up to date, 1 otherwise; build nothing
#   --force  rebuild even if the stamp matches
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
# shellcheck source=hack/lib/stamp.sh
. hack/lib/stamp.sh

ROOT=$(pwd)
TOOLS="$ROOT/hack/tools"
BIN="$ROOT/_output/bin"
STAMP="$BIN/.control-plane.stamp"
LOCK="$ROOT/_output/.control-plane.lock"
# name:package, built in this order.
TARGETS=(
  "etcd:go.etcd.io/etcd/server/v3"
  "kube-apiserver:k8s.io/kubernetes/cmd/kube-apiserver"
  "kube-controller-manager:k8s.io/kubernetes/cmd/kube-controller-manager"
  "kube-scheduler:k8s.io/kubernetes/cmd/kube-scheduler"
  "kube-proxy:k8s.io/kubernetes/cmd/kube-proxy"
  "kubelet:k8s.io/kubernetes/cmd/kubelet"
)

mode=$(stamp_mode "$@")

# RECIPE changes when the way the binaries are built changes (targets, flags); bump it then.
RECIPE="1 ${TARGETS[*]} CGO_ENABLED=0 -trimpath -s -w"

want_stamp() { stamp_want "$TOOLS" "$RECIPE"; }

up_to_date() { stamp_targets_up_to_date "$STAMP" "$TOOLS" "$RECIPE" "$BIN" "${TARGETS[@]}"; }

fmt_duration() {
  local s=$1
  if [ "$s" -ge 60 ]; then printf '%dm%02ds' $((s / 60)) $((s % 60)); else printf '%ds' "$s"; fi
}

if [ "$mode" = check ]; then
  if up_to_date; then exit 0; fi
  exit 1
fi

mkdir -p "$BIN"
stamp_lock "$LOCK" "control plane: another build is running; waiting for it to finish..."

if [ "$mode" = build ] && up_to_date; then
  echo "control plane: up to date in ${BIN#"$ROOT"/} (hack/tools/go.mod and go.sum unchanged)"
  exit 0
fi

cd "$TOOLS"
k8s_version=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
etcd_version=$(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
k8s_major=$(echo "$k8s_version" | sed -E 's/^v([0-9]+)\..*/\1/')
k8s_minor=$(echo "$k8s_version" | sed -E 's/^v[0-9]+\.([0-9]+)\..*/\1/')
# Stamp the Kubernetes version the way its release build does, so /version reports it; the date is fixed
# to keep builds reproducible.
vpkg=k8s.io/component-base/version
ldflags="-s -w -X $vpkg.gitVersion=$k8s_version -X $vpkg.gitMajor=$k8s_major -X $vpkg.gitMinor=$k8s_minor"
ldflags="$ldflags -X $vpkg.gitTreeState=clean -X $vpkg.buildDate=1970-01-01T00:00:00Z"

echo "control plane: building Kubernetes $k8s_version and etcd $etcd_version into ${BIN#"$ROOT"/}"
echo "control plane: a fresh build takes 12-15 minutes on 2 cores; cached rebuilds take seconds"
export CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:-} -trimpath"

# Remove the stamp first: a build interrupted half-way must not look up to date. An interrupted
# build stops its go build and leaves no partial binary.
rm -f "$STAMP"
build_pid=
cleanup() {
  if [ -n "$build_pid" ]; then
    kill -TERM -- "-$build_pid" 2>/dev/null || true
    wait "$build_pid" 2>/dev/null || true
    kill -KILL -- "-$build_pid" 2>/dev/null || true
  fi
  rm -f "$BIN"/.*.tmp
}
trap cleanup EXIT
trap 'echo "control plane: build interrupted" >&2; exit 130' INT TERM
total_start=$(date +%s)
n=${#TARGETS[@]}
i=0
for t in "${TARGETS[@]}"; do
  i=$((i + 1))
  name=${t%%:*}
  pkg=${t#*:}
  start=$(date +%s)
  echo "control plane: building $name ($i/$n)..."
  # In its own process group, so an interrupted build can stop the compilers go build started too.
  setsid go build -ldflags "$ldflags" -o "$BIN/.$name.tmp" "$pkg" &
  build_pid=$!
  # Report progress while the compiler is silent, so a long build does not look hung. Polling
  # (rather than a background ticker) leaves no helper process holding the lock after the build.
  next=60
  while kill -0 "$build_pid" 2>/dev/null; do
    sleep 1
    elapsed=$(($(date +%s) - start))
    if [ "$elapsed" -ge "$next" ] && kill -0 "$build_pid" 2>/dev/null; then
      echo "control plane:   still building $name ($i/$n), $(fmt_duration "$elapsed") so far"
      next=$((next + 60))
    fi
  done
  if ! wait "$build_pid"; then
    build_pid=
    echo "control plane: building $name ($pkg) failed" >&2
    exit 1
  fi
  build_pid=
  mv -f "$BIN/.$name.tmp" "$BIN/$name"
  echo "control plane: building $name ($i/$n)... done in $(fmt_duration $(($(date +%s) - start)))"
done

cd "$ROOT"
want_stamp >"$STAMP"
echo "control plane: all $n binaries built in $(fmt_duration $(($(date +%s) - total_start)))"
