#!/usr/bin/env bash
# hack/lint.sh (make lint): gofmt, go vet and staticcheck over every package, with each build tag
# set the test suites use. staticcheck is built from hack/tools/staticcheck (its pinned module)
# into _output/bin, again whenever that module's go.sum changes.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
SC=_output/bin/staticcheck
TAGS=("" "e2e demo" "cluster upstream clusterdemo" "bench")

step() { echo "lint: $*" >&2; }

step "gofmt"
bad=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$bad" ]; then
  echo "gofmt: these files need gofmt -w:" >&2
  echo "$bad" >&2
  exit 1
fi

if [ ! -x "$SC" ] || [ hack/tools/staticcheck/go.sum -nt "$SC" ]; then
  step "building staticcheck from hack/tools/staticcheck"
  mkdir -p _output/bin
  (cd hack/tools/staticcheck && CGO_ENABLED=0 go build -trimpath -o "$OLDPWD/$SC" honnef.co/go/tools/cmd/staticcheck)
fi

for tags in "${TAGS[@]}"; do
  step "go vet -tags '$tags'"
  go vet -tags "$tags" ./...
  step "staticcheck -tags '$tags'"
  "$SC" -tags "$tags" ./...
done
step "ok"
