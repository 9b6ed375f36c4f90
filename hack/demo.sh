#!/usr/bin/env bash
# hack/demo.sh runs the antrea-proxy demo: real Open vSwitch, pods as network namespaces and the
# real proxier, showing KEP-1860 ipMode under both proxyLoadBalancerIPs settings with real
# traffic. `up` runs it (it cleans up after itself); `down` removes anything an interrupted run
# left behind.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
case "${1:-up}" in
  up)
    echo "demo: building and starting (about a minute the first time)..."
    go test -tags demo -count=1 -run '^TestDemo$' ./test/demo/ -v 2>&1 \
      | grep -v -E '^(=== RUN|--- PASS|PASS|ok |I[0-9]{4} |E[0-9]{4} |W[0-9]{4} )' ;;
  down)
    pkill -f 'test/demo|demo.test' 2>/dev/null || true
    for ns in $(ip netns list | awk '{print $1}' | grep -E '^(client|pod[12]|extlb|ovs)' || true); do
      ip netns delete "$ns" 2>/dev/null || true
    done
    echo "demo: cleaned up" ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
