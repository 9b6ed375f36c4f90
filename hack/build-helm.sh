#!/usr/bin/env bash
# hack/build-helm.sh builds the helm command from the helm.sh/helm/v3 module pinned in
# hack/tools/helm/go.mod into _output/bin/helm. Nothing prebuilt is downloaded: only Go modules from
# the module proxy. `make helm`, `make manifest` and the chart tests (test/chart) use it.
#
# It rebuilds only when hack/tools/helm/go.mod or go.sum (or this script's recipe) changes: a stamp
# file next to the binary records their hash. A fresh build takes about 2 minutes; an up-to-date check
# is instant.
#
# To move to another Helm release: in hack/tools/helm run
#   go get helm.sh/helm/v3@v3.X.Y && go mod tidy
# and commit go.mod and go.sum.
#
# Usage: hack/build-helm.sh [--check|--force]
#   --check  exit 0 if the binary is built and up to date, 1 otherwise; build nothing
#   --force  rebuild even if the stamp matches
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
# shellcheck source=hack/lib/stamp.sh
. hack/lib/stamp.sh

ROOT=$(pwd)
TOOLS="$ROOT/hack/tools/helm"
BIN="$ROOT/_output/bin"
STAMP="$BIN/.helm.stamp"
LOCK="$ROOT/_output/.helm.lock"
PKG=helm.sh/helm/v3/cmd/helm
# RECIPE changes when the way the binary is built changes; bump it then.
RECIPE="1 $PKG CGO_ENABLED=0 -trimpath -s -w"

mode=$(stamp_mode "$@")

want_stamp() { stamp_want "$TOOLS" "$RECIPE"; }

up_to_date() { stamp_up_to_date "$STAMP" "$TOOLS" "$RECIPE" "$BIN/helm"; }

if [ "$mode" = check ]; then
  up_to_date && exit 0
  exit 1
fi

mkdir -p "$BIN"
stamp_lock "$LOCK" "helm: another build is running; waiting for it to finish..." >&2
if [ "$mode" = build ] && up_to_date; then
  exit 0
fi

cd "$TOOLS"
version=$(go list -m -f '{{.Version}}' helm.sh/helm/v3)
echo "helm: building helm $version into ${BIN#"$ROOT"/} (about 2 minutes the first time)" >&2
rm -f "$STAMP"
trap 'rm -f "$BIN/.helm.tmp"' EXIT
start=$(date +%s)
# helm reports its version from these variables, and its default Kubernetes version (.Capabilities
# and lint's deprecation checks) from the k8s.io modules it links; set them the way its release build does.
k8s=$(go list -m -f '{{.Version}}' k8s.io/client-go)
k8s_major=$(echo "$k8s" | sed -E 's/^v0\.([0-9]+)\..*/1/')
k8s_minor=$(echo "$k8s" | sed -E 's/^v0\.([0-9]+)\..*/\1/')
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$version -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for p in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  ldflags="$ldflags -X $p.k8sVersionMajor=$k8s_major -X $p.k8sVersionMinor=$k8s_minor"
done
CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$BIN/.helm.tmp" "$PKG"
mv -f "$BIN/.helm.tmp" "$BIN/helm"
cd "$ROOT"
want_stamp >"$STAMP"
echo "helm: built $version in $(($(date +%s) - start))s" >&2
