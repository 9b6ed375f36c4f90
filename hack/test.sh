#!/usr/bin/env bash
# hack/test.sh runs antrea-proxy's test suites.
#   unit         fast tests, no root, no OVS (go test -race -short); must stay under 2 minutes
#   integration  every package with its real-OVS integration tests (needs root and hack/setup.sh)
#   e2e          the sandbox-cluster end-to-end suite (slow; builds the control plane once)
#   demo         make demo's scenario once, as a test, torn down at the end
#   all          every test once, unit and integration, under the race detector (what `make test`
#                and CI run: one pass, not the unit tests and then everything again)
#   conformance  the differential suite against kube-proxy (test/conformance, docs/conformance.md):
#                CONFORMANCE_SHAPES random Services (default 40) of CONFORMANCE_SEED (default 1)
#   bench-scale  antrea-agent and kube-proxy side by side at BENCH_SIZES (or BENCH_SERVICES) Services (default 10000)
#                × BENCH_ENDPOINTS endpoints (default 10), BENCH_CHANGES changes (default 50);
#                prints the table of docs/performance.md (test/bench, build tag bench)
#   stress       the concurrent packages' fast tests under -race STRESS_COUNT times (default 20):
#                the proxier, the healer, the LoadBalancer controller, the reject responder
#   fuzz         every Go fuzz target (func FuzzXxx in a _test.go file) for FUZZTIME each
#                (default 60s), one after another; fails if any finds a crasher
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
# run_harness_units runs the tests of the slower suites' harnesses that need no cluster, no root
# and no sandbox (build tags cluster and bench): ProxyLB's model and relays on 127.0.0.1, the
# upstream run's options and JUnit report, the bench's growth fits and parsers.
run_harness_units() {
  echo "== the suites' harness tests (tags cluster and bench; no cluster) =="
  go test -count=1 -tags cluster \
    -run '^(TestFindEndpointFirstPickup|TestDesiredFrontends.*|TestFrontend.*|TestProxyLBFollowsServiceChanges|TestKeepAliveScriptOneWrite|TestParseJUnit.*|TestUpstreamOptions.*)$' ./test/cluster/
  go test -count=1 -tags bench \
    -run '^(TestGrowthExponent|TestFormatGrowth|TestFitPerService|TestChainHolds|TestParseMemStat|TestPerMinute|TestContextSwitches|TestLoaderChoice|TestTenthRecorderSteps|TestFreeClusterIPs|TestEtcdWriterStoresWhatKubeAPIServerReads|TestFormatReportAgentOnly)$' ./test/bench/
}
run_unit() {
  build_helm
  # -race needs cgo (and gcc, installed by hack/setup.sh).
  echo "== unit tests (go test -race -short) =="
  CGO_ENABLED=1 go test -race -short -count=1 $pkgs
  run_harness_units
}
# fuzz_targets prints "package target" for every fuzz target in the tree: packages whose test
# files define a Fuzz function, asked for their exact list with go test -list.
fuzz_targets() {
  local dirs d list
  dirs=$(grep -rlE --include='*_test.go' '^func Fuzz[A-Z0-9_]' pkg cmd test 2>/dev/null | xargs -r -n1 dirname | sort -u || true)
  for d in $dirs; do
    list=$(go test -list '^Fuzz' "./$d") # a package that does not build fails here
    grep '^Fuzz' <<<"$list" | sed "s|^|./$d |" || true
  done
}
# run_fuzz runs each target for FUZZTIME, printing its progress, and a summary at the end. A
# crasher is written by go test to the package's testdata/fuzz/<target>/: commit it as a
# regression seed together with the fix.
run_fuzz() {
  local fuzztime=${FUZZTIME:-60s} targets log failed=0 summary=""
  targets=$(fuzz_targets)
  if [ -z "$targets" ]; then echo "no fuzz targets found" >&2; return 1; fi
  echo "== fuzz: $(echo "$targets" | wc -l) targets, $fuzztime each =="
  log=$(mktemp)
  while read -r pkg target; do
    echo "-- fuzz $pkg $target ($fuzztime)"
    local rc=0
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" ${FUZZFLAGS:-} "$pkg" </dev/null 2>&1 | tee "$log" || rc=$?
    local execs
    execs=$(grep -o 'execs: [0-9]*' "$log" | tail -1 | cut -d' ' -f2 || true)
    if [ "$rc" -ne 0 ]; then
      failed=1
      summary+=$(printf '%-48s %-32s %10s  FAIL (see testdata/fuzz/%s)' "$pkg" "$target" "${execs:-?}" "$target")$'\n'
    else
      summary+=$(printf '%-48s %-32s %10s  ok' "$pkg" "$target" "${execs:-?}")$'\n'
    fi
  done <<<"$targets"
  rm -f "$log"
  echo "== fuzz summary (package, target, execs, result) =="
  printf '%s' "$summary"
  return $failed
}
# run_stress repeats the fast tests of the packages with the most concurrency (sync loop and
# replays, healer checks, controller workers, responder) under the race detector, to find
# interleavings a single run misses.
run_stress() {
  local n=${STRESS_COUNT:-20}
  echo "== stress: go test -race -short -count=$n over the concurrent packages =="
  CGO_ENABLED=1 go test -race -short -count="$n" -timeout 30m \
    ./pkg/proxy/... ./pkg/healer/... ./pkg/loadbalancer/... ./pkg/agent/...
}
# run_all runs every package's tests once, the real-OVS integration tests included, with the race
# detector: each test runs once, and the integration tests are raced too.
run_all() {
  build_helm
  echo "== unit and integration tests (go test -race; real Open vSwitch, userspace datapath) =="
  CGO_ENABLED=1 go test -race -count=1 -timeout 30m $pkgs
  run_harness_units
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
run_conformance() {
  echo "== conformance with kube-proxy (${CONFORMANCE_SHAPES:-40} shapes, seed ${CONFORMANCE_SEED:-1}) =="
  # kube-proxy is built with the control plane from hack/tools.
  bash hack/build-control-plane.sh
  CONFORMANCE_SHAPES=${CONFORMANCE_SHAPES:-40} CONFORMANCE_SEED=${CONFORMANCE_SEED:-1} \
    go test -count=1 -timeout 45m -tags e2e -run '^TestConformance$' ./test/conformance/ -v
}
# run_demo runs `make demo`'s scenario once as a test (test/e2e/demo, build tag demo): the same
# sandbox, provider, Services and checked traffic, torn down at the end instead of left running.
run_demo() {
  echo "== demo (test/e2e/demo, as \`make demo\` runs it, then torn down) =="
  bash hack/build-control-plane.sh
  go test -count=1 -timeout 20m -tags demo -run '^TestDemo$' ./test/e2e/demo/
}
# run_bench_scale runs the side-by-side scale benchmark (test/bench) at BENCH_SIZES (e.g.
# 1000,10000,30000; one fresh sandbox each) or BENCH_SERVICES Services; it asserts only that both
# proxies programmed every Service and that every figure was measured. Every size's figures go to
# BENCH_RESULTS (default _output/bench-scale), and the growth table covers every size found there.
# The go test timeout grows with the sizes (kube-proxy's first sync is about quadratic).
run_bench_scale() {
  local sizes=${BENCH_SIZES:-${BENCH_SERVICES:-10000}} minutes=20 n
  for n in ${sizes//,/ }; do
    minutes=$(( minutes + 10 + n / 1000 + (n / 1000) * (n / 1000) / 20 ))
  done
  export BENCH_RESULTS=${BENCH_RESULTS:-$(pwd)/_output/bench-scale}
  echo "== bench-scale: ${sizes} Services x ${BENCH_ENDPOINTS:-10} endpoints, antrea-agent and kube-proxy (timeout ${minutes}m, results in ${BENCH_RESULTS}) =="
  bash hack/build-control-plane.sh
  go test -count=1 -timeout "${minutes}m" -tags bench ./test/bench/ -v
}
case "$suite" in
  unit) run_unit ;;
  demo) run_demo ;;
  integration) run_integration ;;
  e2e) run_e2e ;;
  all) run_all ;;
  conformance) run_conformance ;;
  fuzz) run_fuzz ;;
  stress) run_stress ;;
  bench-scale) run_bench_scale ;;
  *) echo "usage: $0 unit|integration|e2e|conformance|demo|all|fuzz|stress|bench-scale" >&2; exit 2 ;;
esac
