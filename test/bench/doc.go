// Package bench holds the side-by-side scale benchmark of antrea-agent and kube-proxy on the e2e
// sandbox (make bench-scale, docs/performance.md). Its tests carry the build tag "bench":
//
//	BENCH_SERVICES=1000 go test -count=1 -tags bench -run TestBenchScale -timeout 60m ./test/bench/ -v
//	BENCH_SIZES=1000,10000,30000 BENCH_RESULTS=$PWD/_output/bench-scale make bench-scale
//
// The unit tests of its report and of its netlink probe run with it (TestChainHolds needs root,
// as the benchmark does).
package bench
