// Package bench holds the side-by-side scale benchmark of antrea-agent and kube-proxy on the e2e
// sandbox (make bench-scale). Its tests carry the build tag "bench":
//
//	BENCH_SERVICES=1000 go test -count=1 -tags bench -run TestBenchScale -timeout 60m ./test/bench/ -v
package bench
