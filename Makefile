# antrea-proxy Makefile. `make demo` and `make test` are the two commands a newcomer needs; both run
# hack/setup.sh first, which installs what is missing on a fresh Debian machine.
SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)
GO ?= go
OUTPUT := _output
BIN := $(OUTPUT)/bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/antrea-proxy/antrea-proxy/pkg/version.Version=$(VERSION)
BINARIES := antrea-agent antctl antrea-cni antrea-controller
# Unit tests: fast, no root, no OVS. Integration tests: real OVS in temp dirs, need root.
UNIT_PKGS = $(shell $(GO) list ./...)
INTEGRATION_RUN := 'Integration|RealOVS|TestStart|TestNetNS|TestEcho|TestOfctl|TestClient'

.PHONY: all build setup test test-unit test-integration test-e2e test-conformance fuzz stress bench lint fmt generate demo demo-down clean helm manifest images test-cluster demo-cluster demo-cluster-down test-cluster-failover test-cluster-migration bench-scale test-upstream-e2e test-upstream-conformance e2e-upstream-build

all: build

setup:
	@bash hack/setup.sh

build:
	@mkdir -p $(BIN)
	@for b in $(BINARIES); do \
	  if [ -d cmd/$$b ] && ls cmd/$$b/*.go >/dev/null 2>&1; then \
	    echo "build: $$b"; CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/$$b ./cmd/$$b || exit 1; \
	  fi; \
	done

# make test: the README's test command. Unit tests, then the integration suites (real OVS).
test: setup
	@bash hack/test.sh all

test-unit:
	@bash hack/test.sh unit

test-integration: setup
	@bash hack/test.sh integration

test-e2e: setup
	@bash hack/test.sh e2e

# test-conformance: the differential suite against kube-proxy (docs/conformance.md), 200 random
# Service shapes of seed 1 by default; CONFORMANCE_SHAPES and CONFORMANCE_SEED override them.
test-conformance: setup
	@CONFORMANCE_SHAPES=$${CONFORMANCE_SHAPES:-200} bash hack/test.sh conformance

# fuzz: every Go fuzz target in the tree for FUZZTIME each (default 60s), one after another;
# fails on any crasher. `make fuzz FUZZTIME=10s` for a quick run. The seed corpora (f.Add and
# testdata/fuzz) also run as ordinary tests in `make test`.
FUZZTIME ?= 60s
fuzz:
	@FUZZTIME=$(FUZZTIME) bash hack/test.sh fuzz

# bench-scale: antrea-agent and kube-proxy side by side on one sandbox apiserver (test/bench,
# docs/performance.md), BENCH_SIZES (e.g. 1000,10000,30000) or BENCH_SERVICES (default 10000)
# × BENCH_ENDPOINTS (10), BENCH_CHANGES (50); figures in BENCH_RESULTS (_output/bench-scale).
bench-scale: setup
	@bash hack/test.sh bench-scale

bench: setup
	$(GO) test ./pkg/ovs/openflow/ofctl -run '^$$' -bench . -benchtime 3x
	$(GO) test ./pkg/proxy/... -run '^$$' -bench . -benchtime 3x

# stress: the concurrent packages' fast tests under -race STRESS_COUNT times (default 20).
stress:
	@bash hack/test.sh stress

# lint: gofmt, go vet and staticcheck (built from hack/tools/staticcheck) with every build tag set
# of the suites (hack/lint.sh).
lint:
	@bash hack/lint.sh

generate:
	$(GO) generate ./pkg/...

# helm: build the helm pinned in hack/tools/helm into _output/bin/helm (rebuilt only when the pin
# changes). manifest: regenerate build/yamls/antrea-proxy.yml from the chart (test/chart fails when
# it drifts).
helm:
	@bash hack/build-helm.sh

manifest:
	@bash hack/generate-manifest.sh

# images: build the agent, controller, pause and echo-server images with podman on a debootstrap'ed
# Debian base, without a registry, and save them under _output/images (hack/images.sh; cached by
# their inputs). See build/images/README.md for docker and public bases.
images:
	@bash hack/images.sh

# test-cluster: the real-cluster suite (test/cluster): the images on real kubelet + containerd
# nodes, the chart installed with helm; removes everything also on failure or interrupt.
# demo-cluster: the same cluster, left running (demo-cluster-down stops it). CLUSTER_NODES=N
# sets the node count (default 2).
test-cluster: setup build
	@bash hack/cluster.sh test

# test-cluster-failover: LoadBalancer IP failover measured on three real nodes (TestClusterLBFailover:
# agent + ovs-vswitchd killed, node frozen, kubectl drain, agent Pod deleted): about 4 minutes.
test-cluster-failover: setup build
	@bash hack/cluster.sh failover

# test-cluster-migration: a live cluster moved from kube-proxy (nftables mode) to antrea-proxy
# (proxyAll) and back under traffic (TestClusterKubeProxyMigration, docs/getting-started.md).
test-cluster-migration: setup build
	@bash hack/cluster.sh migration

# test-upstream-e2e: the upstream Kubernetes e2e suite (e2e.test of k8s.io/kubernetes, built by
# hack/build-e2e.sh) against that cluster: the Services and LoadBalancers specs of SIG Network,
# docs/conformance.md "Upstream Kubernetes e2e". Report and logs in _output/upstream-e2e/<time>.
# UPSTREAM_E2E_FOCUS/SKIP/PROCS/TIMEOUT override the run; UPSTREAM_E2E_IPMODE=Proxy runs the
# LoadBalancers specs with a Proxy pool relayed by an external L4 load balancer.
# test-upstream-conformance: only the 15 [Conformance] Services specs (CI). e2e-upstream-build only
# builds the suite.
test-upstream-e2e: setup build
	@bash hack/cluster.sh upstream

test-upstream-conformance: setup build
	@bash hack/cluster.sh conformance

e2e-upstream-build:
	@nice -n 10 bash hack/build-e2e.sh

demo-cluster: setup build
	@bash hack/cluster.sh demo

demo-cluster-down:
	@bash hack/cluster.sh down

demo: setup build
	@bash hack/demo.sh up

demo-down:
	@bash hack/demo.sh down

clean:
	rm -rf $(OUTPUT)
