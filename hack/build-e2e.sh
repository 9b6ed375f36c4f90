#!/usr/bin/env bash
# hack/build-e2e.sh builds the upstream Kubernetes end-to-end suite from the Go modules pinned in
# hack/tools/e2e/go.mod (k8s.io/kubernetes at the version hack/tools pins, with the same replace
# block) into _output/bin:
#
#   e2e.test  `go test -c k8s.io/kubernetes/test/e2e`, the suite itself
#   ginkgo    github.com/onsi/ginkgo/v2/ginkgo at the version k8s.io/kubernetes requires
#
# The suite's test image, agnhost, comes from the same module: hack/images.sh (IMAGES_E2E=1)
# builds it.
#
# Nothing prebuilt is downloaded: only Go modules from the module proxy. The flags are the control
# plane's (CGO_ENABLED=0, -trimpath), so the packages both builds share come from the Go build
# cache. It rebuilds only when hack/tools/e2e/go.mod or go.sum (or the recipe below) changes: a
# stamp file next to the binaries records their hash.
#
# Usage: hack/build-e2e.sh [--check|--force]
#   --check  exit 0 if the binaries are built and up to date, 1 otherwise; build nothing
#   --force  rebuild even if the stamp matches
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
# shellcheck source=hack/lib/progress.sh
. hack/lib/progress.sh
# shellcheck source=hack/lib/stamp.sh
. hack/lib/stamp.sh

ROOT=$(pwd)
TOOLS="$ROOT/hack/tools/e2e"
BIN="$ROOT/_output/bin"
STAMP="$BIN/.e2e.stamp"
LOCK="$ROOT/_output/.e2e.lock"
# name:kind:package, built in this order; kind is "test" (go test -c) or "cmd" (go build).
TARGETS=(
  "ginkgo:cmd:github.com/onsi/ginkgo/v2/ginkgo"
  "e2e.test:test:k8s.io/kubernetes/test/e2e"
)
# RECIPE changes when the way the binaries are built changes (targets, flags); bump it then.
RECIPE="1 ${TARGETS[*]} CGO_ENABLED=0 -trimpath -s -w"

mode=$(stamp_mode "$@")

want_stamp() { stamp_want "$TOOLS" "$RECIPE"; }

up_to_date() { stamp_targets_up_to_date "$STAMP" "$TOOLS" "$RECIPE" "$BIN" "${TARGETS[@]}"; }

if [ "$mode" = check ]; then
  up_to_date
  exit
fi

mkdir -p "$BIN"
stamp_lock "$LOCK" "e2e: another build is running; waiting for it to finish..."
if [ "$mode" = build ] && up_to_date; then
  echo "e2e: up to date in ${BIN#"$ROOT"/} (hack/tools/e2e/go.mod and go.sum unchanged)"
  exit 0
fi

cd "$TOOLS"
k8s_version=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
ginkgo_version=$(go list -m -f '{{.Version}}' github.com/onsi/ginkgo/v2)
vpkg=k8s.io/component-base/version
k8s_major=$(echo "$k8s_version" | sed -E 's/^v([0-9]+)\..*/\1/')
k8s_minor=$(echo "$k8s_version" | sed -E 's/^v[0-9]+\.([0-9]+)\..*/\1/')
ldflags="-s -w -X $vpkg.gitVersion=$k8s_version -X $vpkg.gitMajor=$k8s_major -X $vpkg.gitMinor=$k8s_minor"
ldflags="$ldflags -X $vpkg.gitTreeState=clean -X $vpkg.buildDate=1970-01-01T00:00:00Z"
echo "e2e: building e2e.test of Kubernetes $k8s_version and ginkgo $ginkgo_version into ${BIN#"$ROOT"/}"
echo "e2e: e2e.test is large: a build with a cold Go cache took about 10 minutes on 2 busy cores"
export CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:-} -trimpath"

# Remove the stamp first: a build interrupted half-way must not look up to date.
rm -f "$STAMP"
trap 'stop_progress_job; rm -f "$BIN"/.*.tmp' EXIT
trap 'echo "e2e: build interrupted" >&2; exit 130' INT TERM
total_start=$(date +%s)
n=${#TARGETS[@]}
i=0
for t in "${TARGETS[@]}"; do
  i=$((i + 1))
  name=${t%%:*}
  rest=${t#*:}
  kind=${rest%%:*}
  pkg=${rest#*:}
  start=$(date +%s)
  echo "e2e: building $name ($i/$n)..."
  cmd=(go build -ldflags "$ldflags" -o "$BIN/.$name.tmp" "$pkg")
  [ "$kind" = test ] && cmd=(go test -c -ldflags "$ldflags" -o "$BIN/.$name.tmp" "$pkg")
  if ! run_with_progress e2e "building $name ($i/$n)" "${cmd[@]}"; then
    echo "e2e: building $name ($pkg) failed" >&2
    exit 1
  fi
  mv -f "$BIN/.$name.tmp" "$BIN/$name"
  echo "e2e: building $name ($i/$n)... done in $(fmt_duration $(($(date +%s) - start)))"
done
cd "$ROOT"
want_stamp >"$STAMP"
echo "e2e: all $n binaries built in $(fmt_duration $(($(date +%s) - total_start)))"
